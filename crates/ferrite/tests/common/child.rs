//! A test's own binary run again as a child process, the writer a crash test kills: its
//! stdout arrives line by line on a channel while it runs, its stderr is kept for the failure
//! message, and it is killed (SIGKILL) when dropped, so that a failing parent leaves no
//! writer behind.

use std::ffi::OsStr;
use std::io::{BufRead, BufReader, Read};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc::{self, Receiver};
use std::thread::JoinHandle;

/// A running child.
#[derive(Debug)]
pub struct Writer {
    child: Child,
    /// The child's stdout, a line at a time (the test harness's own lines among them).
    pub lines: Receiver<String>,
    stdout: Option<JoinHandle<()>>,
    stderr: Option<JoinHandle<String>>,
}

impl Writer {
    /// Starts this test binary again running only test `test_name`, with `env` added to its
    /// environment (which is how the child knows it is one).
    pub fn start<K, V>(test_name: &str, env: impl IntoIterator<Item = (K, V)>) -> Writer
    where
        K: AsRef<OsStr>,
        V: AsRef<OsStr>,
    {
        let exe = std::env::current_exe().expect("the test binary");
        let mut child = Command::new(exe)
            .args(["--exact", test_name, "--nocapture", "--test-threads", "1"])
            .envs(env)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("starting the child");
        let (send, lines) = mpsc::channel();
        let stdout = child.stdout.take().expect("piped");
        let stdout = std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut stderr = child.stderr.take().expect("piped");
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        Writer { child, lines, stdout: Some(stdout), stderr: Some(stderr) }
    }

    /// Kills the child (SIGKILL) and waits for it: its status, every line it wrote that was
    /// not received yet, and its stderr.
    pub fn kill(mut self) -> (ExitStatus, Vec<String>, String) {
        // `Child::kill` sends SIGKILL on Unix; it fails only if the child was reaped already.
        let _ = self.child.kill();
        let status = self.child.wait().expect("waiting for the child");
        self.stdout.take().expect("once").join().expect("the stdout reader");
        let rest = self.lines.try_iter().collect();
        let stderr = self.stderr.take().expect("once").join().expect("the stderr reader");
        (status, rest, stderr)
    }
}

impl Drop for Writer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
