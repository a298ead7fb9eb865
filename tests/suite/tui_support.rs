//! The real `keel` binary in a pseudo-terminal (portable-pty), for the `keel chat` suites: the
//! bytes it writes are collected by a reader thread, keys are written to the master side, and
//! the window can be resized while it runs. Tests look at those bytes, the session log and the
//! model server's requests, never at the model's words as proof of work.

use std::io::{Read as _, Write as _};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use keel_tests::Env;
use keel_tests::model_server::ModelServer;
use portable_pty::{Child, CommandBuilder, MasterPty, PtySize, native_pty_system};

use crate::suite::agent_support::agent_env;

/// A test profile `t` (the agent suites' one, see `agent_env`) with the `tui` row added.
pub fn chat_env(server: &ModelServer) -> Env {
    agent_env(server, "[[insert]]\nid = \"tui\"\nplugin = \"tui\"\n")
}

/// `keel ARGS` running in a pseudo-terminal of `cols` × `rows`.
pub struct Pty {
    master: Box<dyn MasterPty + Send>,
    writer: Box<dyn std::io::Write + Send>,
    child: Box<dyn Child + Send + Sync>,
    bytes: Arc<Mutex<Vec<u8>>>,
}

impl Pty {
    /// Starts `keel ARGS` in `env` on a terminal (`TERM=xterm-256color`, no `NO_COLOR`),
    /// with `vars` added.
    pub fn spawn(env: &Env, args: &[&str], vars: &[(&str, &str)]) -> Pty {
        let pair = native_pty_system()
            .openpty(PtySize {
                rows: 24,
                cols: 80,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("open a pty");
        let mut cmd = CommandBuilder::new(&env.bin);
        cmd.args(args);
        cmd.cwd(env.work());
        cmd.env_remove("KEEL_PLUGIN_PATH");
        cmd.env_remove("KEEL_LOG");
        cmd.env_remove("NO_COLOR");
        cmd.env("TERM", "xterm-256color");
        cmd.env("KEEL_HOME", env.home());
        cmd.env("KEEL_CONFIG_PATH", env.path().join("config"));
        cmd.env("KEEL_PROOF_TRACE", env.trace_file());
        for (k, v) in &env.vars {
            cmd.env(k, v);
        }
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let child = pair
            .slave
            .spawn_command(cmd)
            .expect("spawn keel on the pty");
        drop(pair.slave);
        let mut reader = pair.master.try_clone_reader().expect("pty reader");
        let writer = pair.master.take_writer().expect("pty writer");
        let bytes = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&bytes);
        std::thread::spawn(move || {
            let mut buf = [0_u8; 4096];
            while let Ok(n) = reader.read(&mut buf) {
                if n == 0 {
                    break;
                }
                sink.lock().unwrap().extend_from_slice(&buf[..n]);
            }
        });
        Pty {
            master: pair.master,
            writer,
            child,
            bytes,
        }
    }

    /// Everything written so far, as text.
    pub fn output(&self) -> String {
        String::from_utf8_lossy(&self.bytes.lock().unwrap()).into_owned()
    }

    /// The screen a `cols` × `rows` terminal shows after the bytes up to `resized_at` at
    /// that size and the rest at `after` (cols, rows): what a person would see.
    pub fn screen(&self, size: (u16, u16), resized_at: Option<(usize, (u16, u16))>) -> String {
        let bytes = self.bytes.lock().unwrap().clone();
        let mut parser = vt100::Parser::new(size.1, size.0, 0);
        match resized_at {
            Some((at, (cols, rows))) => {
                let (before, after) = bytes.split_at(at.min(bytes.len()));
                parser.process(before);
                parser.set_size(rows, cols);
                parser.process(after);
            }
            None => parser.process(&bytes),
        }
        parser.screen().contents()
    }

    /// How many bytes were written so far.
    pub fn len(&self) -> usize {
        self.bytes.lock().unwrap().len()
    }

    /// Waits until the output after byte `from` contains `needle`; answers the offset just
    /// after it. Panics with the output after `limit`.
    pub fn expect_from(&self, from: usize, needle: &str, limit: Duration) -> usize {
        let deadline = Instant::now() + limit;
        let needle_bytes = needle.as_bytes();
        loop {
            {
                let bytes = self.bytes.lock().unwrap();
                let tail = bytes.get(from..).unwrap_or_default();
                if let Some(at) = tail
                    .windows(needle_bytes.len())
                    .position(|w| w == needle_bytes)
                {
                    return from + at + needle_bytes.len();
                }
            }
            if Instant::now() > deadline {
                panic!(
                    "{needle:?} did not appear within {limit:?}; the terminal got:\n{}",
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// [`Pty::expect_from`] the start.
    pub fn expect(&self, needle: &str, limit: Duration) -> usize {
        self.expect_from(0, needle, limit)
    }

    /// Types `message` and Enter, then waits until the turn it started is over (the status
    /// line says `working`, then `ready` again); answers the offset after that.
    pub fn turn(&mut self, message: &str, limit: Duration) -> usize {
        let mark = self.len();
        self.send(&format!("{message}\r"));
        let working = self.expect_from(mark, "· working", limit);
        self.expect_from(working, "· ready", limit)
    }

    /// Types `text` (keys as bytes: `\r` is Enter, `\x03` Ctrl-C, `\x04` Ctrl-D).
    pub fn send(&mut self, text: &str) {
        self.writer
            .write_all(text.as_bytes())
            .expect("write to the pty");
        self.writer.flush().expect("flush the pty");
    }

    /// Resizes the window (the child gets SIGWINCH).
    pub fn resize(&self, cols: u16, rows: u16) {
        self.master
            .resize(PtySize {
                rows,
                cols,
                pixel_width: 0,
                pixel_height: 0,
            })
            .expect("resize the pty");
    }

    /// Waits for the process to end; its exit code (panics after `limit`, killing it).
    pub fn wait(&mut self, limit: Duration) -> u32 {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(status) = self.child.try_wait().expect("poll keel") {
                return status.exit_code();
            }
            if Instant::now() > deadline {
                let _ = self.child.kill();
                panic!(
                    "keel chat did not exit within {limit:?}; the terminal got:\n{}",
                    self.output()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Pty {
    fn drop(&mut self) {
        if let Ok(None) = self.child.try_wait() {
            let _ = self.child.kill();
        }
    }
}
