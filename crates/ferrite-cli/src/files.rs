//! The files of `--value-file` and `--output`: the bytes a value is streamed from (a file or
//! standard input) and to (a file or standard output).
//!
//! The engine streams through them (`Tree::put_from` reads an [`Input`], `Tree::get_into`
//! writes an [`Output`]) and wraps what fails in an error of its own. Each keeps the first
//! error it met, so that the command can name the file that failed ("reading photo.jpg
//! failed: ...") instead of the engine's step, and so that a reader that went away
//! (`ferrite get ... --output - | head -c 10`) still ends the command quietly.
//!
//! An output file is opened before the command starts (so a path that cannot be written
//! fails at once) but not emptied until the value is there to replace it: a key that is
//! absent, or a command that fails, leaves an existing file as it was and removes one the
//! command created.

use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Write};
use std::path::PathBuf;

use crate::common::CliError;
use crate::value::FileArg;

/// The bytes to store: a file, standard input, or a command-line argument.
pub struct Input<'a> {
    reader: Box<dyn Read + 'a>,
    /// What it is, for messages: the path, "standard input" or "VALUE".
    from: String,
    /// Its length, when known before reading (a regular file, an argument).
    len: Option<u64>,
    /// The first error a read met.
    error: Option<io::Error>,
}

impl<'a> Input<'a> {
    /// `--value-file PATH`, opened (and checked to be something that can be read).
    pub fn open(arg: &FileArg) -> Result<Input<'static>, CliError> {
        let path = match arg {
            FileArg::Std => {
                return Ok(Input {
                    reader: Box::new(io::stdin().lock()),
                    from: "standard input".into(),
                    len: None,
                    error: None,
                })
            }
            FileArg::Path(path) => path,
        };
        let from = path.display().to_string();
        let failed = |source| CliError::Input { from: from.clone(), source };
        let file = File::open(path).map_err(failed)?;
        let metadata = file.metadata().map_err(failed)?;
        if metadata.is_dir() {
            return Err(failed(io::Error::from_raw_os_error(libc::EISDIR)));
        }
        let len = metadata.is_file().then_some(metadata.len());
        Ok(Input { reader: Box::new(file), from, len, error: None })
    }

    /// The bytes of an argument.
    pub fn bytes(bytes: &'a [u8]) -> Input<'a> {
        Input {
            reader: Box::new(bytes),
            from: "VALUE".into(),
            len: Some(bytes.len() as u64),
            error: None,
        }
    }

    /// What the input is, for messages.
    pub fn from(&self) -> &str {
        &self.from
    }

    /// Its length, when known before reading.
    pub fn len(&self) -> Option<u64> {
        self.len
    }

    /// The error of a step that read this input: the input's own error when a read failed
    /// (the engine wraps it), else `other`.
    pub fn blame(&mut self, other: impl Into<CliError>) -> CliError {
        match self.error.take() {
            Some(source) => CliError::Input { from: self.from.clone(), source },
            None => other.into(),
        }
    }
}

impl Read for Input<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.reader.read(buf).map_err(|e| keep(&mut self.error, e))
    }
}

/// Where the bytes read go: `--output PATH`, or standard output.
pub struct Output<'a> {
    target: Target<'a>,
    /// The first error a write met.
    error: Option<io::Error>,
}

enum Target<'a> {
    Stdout(&'a mut dyn Write),
    File {
        file: File,
        path: PathBuf,
        /// This command created the file (it is removed unless [`Output::finish`] is called).
        created: bool,
        /// What the file held before is gone (or there was nothing to remove).
        emptied: bool,
        /// The bytes written are the command's result: keep the file.
        kept: bool,
    },
}

impl<'a> Output<'a> {
    /// `--output PATH` (`-` or none: `stdout`, standard output as the command has it).
    pub fn open(arg: Option<&FileArg>, stdout: &'a mut dyn Write) -> Result<Output<'a>, CliError> {
        let path = match arg {
            None | Some(FileArg::Std) => {
                return Ok(Output { target: Target::Stdout(stdout), error: None })
            }
            Some(FileArg::Path(path)) => path,
        };
        let failed = |source| CliError::OutputFile { path: path.clone(), source };
        // Not truncated yet: the key may be absent.
        let (file, created) = match OpenOptions::new().write(true).create_new(true).open(path) {
            Ok(file) => (file, true),
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {
                (OpenOptions::new().write(true).open(path).map_err(failed)?, false)
            }
            Err(e) => return Err(failed(e)),
        };
        let target =
            Target::File { file, path: path.clone(), created, emptied: created, kept: false };
        Ok(Output { target, error: None })
    }

    /// The bytes written are the command's result: empties a file nothing was written to
    /// yet (the value is empty), flushes, and keeps the file.
    pub fn finish(mut self) -> Result<(), CliError> {
        let done = match self.empty() {
            Ok(()) => self.flush(),
            Err(e) => Err(keep(&mut self.error, e)),
        };
        if let Err(e) = done {
            return Err(self.blame(e));
        }
        if let Target::File { kept, .. } = &mut self.target {
            *kept = true;
        }
        Ok(())
    }

    /// The error of a step that wrote to this output: the output's own error when a write
    /// failed (the engine wraps it), else `other`.
    pub fn blame(&mut self, other: impl Into<CliError>) -> CliError {
        let Some(source) = self.error.take() else { return other.into() };
        match &self.target {
            Target::Stdout(_) => CliError::Output(source),
            Target::File { path, .. } => CliError::OutputFile { path: path.clone(), source },
        }
    }

    /// Removes what an existing file held, before the first byte is written: once only, and
    /// only from a regular file (a FIFO or a device, /dev/stdout, cannot be truncated).
    fn empty(&mut self) -> io::Result<()> {
        if let Target::File { file, emptied, .. } = &mut self.target {
            if !*emptied {
                if file.metadata()?.is_file() {
                    file.set_len(0)?;
                }
                *emptied = true;
            }
        }
        Ok(())
    }
}

impl Write for Output<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let written = self.empty().and_then(|()| match &mut self.target {
            Target::Stdout(out) => out.write(buf),
            Target::File { file, .. } => file.write(buf),
        });
        written.map_err(|e| keep(&mut self.error, e))
    }

    fn flush(&mut self) -> io::Result<()> {
        let flushed = match &mut self.target {
            Target::Stdout(out) => out.flush(),
            Target::File { file, .. } => file.flush(),
        };
        flushed.map_err(|e| keep(&mut self.error, e))
    }
}

impl Drop for Output<'_> {
    fn drop(&mut self) {
        if let Target::File { path, created: true, kept: false, .. } = &self.target {
            // Nothing to report it to: the command already ends with its own outcome.
            let _ = fs::remove_file(path);
        }
    }
}

/// Keeps `e` in `slot` if it is the first error (an interrupted call is retried, not an
/// error), and returns a copy for the caller (the engine), which may wrap it.
fn keep(slot: &mut Option<io::Error>, e: io::Error) -> io::Error {
    let copy = io::Error::new(e.kind(), e.to_string());
    if slot.is_none() && e.kind() != io::ErrorKind::Interrupted {
        *slot = Some(e);
    }
    copy
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp() -> tempfile::TempDir {
        tempfile::Builder::new().prefix("cli-files").tempdir().unwrap()
    }

    #[test]
    fn an_input_names_the_file_that_failed() {
        let dir = temp();
        let missing = FileArg::Path(dir.path().join("missing"));
        let e = Input::open(&missing).err().unwrap();
        assert!(e.to_string().starts_with("reading /"), "{e}");
        assert!(e.to_string().ends_with("missing failed: No such file or directory (os error 2)"));
        let e = Input::open(&FileArg::Path(dir.path().to_owned())).err().unwrap();
        assert!(e.to_string().ends_with("failed: Is a directory (os error 21)"), "{e}");
        let path = dir.path().join("value");
        fs::write(&path, b"12345").unwrap();
        let mut input = Input::open(&FileArg::Path(path.clone())).unwrap();
        assert_eq!(input.len(), Some(5));
        assert_eq!(input.from(), path.display().to_string());
        let mut bytes = Vec::new();
        input.read_to_end(&mut bytes).unwrap();
        assert_eq!(bytes, b"12345");
        // No read failed: the engine's error stands.
        assert!(matches!(input.blame(ferrite::Error::Closed), CliError::Engine(_)));
    }

    /// A reader whose reads fail after `ok` bytes.
    struct Failing(usize);

    impl Read for Failing {
        fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
            if self.0 == 0 {
                return Err(io::Error::from_raw_os_error(libc::EIO));
            }
            let n = buf.len().min(self.0);
            buf[..n].fill(7);
            self.0 -= n;
            Ok(n)
        }
    }

    #[test]
    fn a_failed_read_is_blamed_on_the_input() {
        let reader = Box::new(Failing(3));
        let mut input = Input { reader, from: "piece.bin".into(), len: None, error: None };
        let mut bytes = Vec::new();
        let e = input.read_to_end(&mut bytes).unwrap_err();
        assert_eq!(bytes, [7, 7, 7]);
        // What the engine would do with it: wrap it.
        let wrapped = ferrite::Error::Io { context: "streaming".into(), source: e };
        assert_eq!(
            input.blame(wrapped).to_string(),
            "reading piece.bin failed: Input/output error (os error 5)"
        );
    }

    #[test]
    fn an_output_file_is_replaced_only_when_finished() {
        let dir = temp();
        let path = dir.path().join("out");
        let arg = FileArg::Path(path.clone());
        let mut stdout = Vec::new();
        // Created, then abandoned (an absent key): removed.
        drop(Output::open(Some(&arg), &mut stdout).unwrap());
        assert!(!path.exists());
        // An existing file is left as it was until something is written.
        fs::write(&path, b"old contents").unwrap();
        drop(Output::open(Some(&arg), &mut stdout).unwrap());
        assert_eq!(fs::read(&path).unwrap(), b"old contents");
        let mut output = Output::open(Some(&arg), &mut stdout).unwrap();
        output.write_all(b"new").unwrap();
        output.finish().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"new");
        // An empty value empties it.
        Output::open(Some(&arg), &mut stdout).unwrap().finish().unwrap();
        assert_eq!(fs::read(&path).unwrap(), b"");
        // A created file that was finished stays.
        let created = dir.path().join("created");
        let mut output = Output::open(Some(&FileArg::Path(created.clone())), &mut stdout).unwrap();
        output.write_all(b"x").unwrap();
        output.finish().unwrap();
        assert_eq!(fs::read(&created).unwrap(), b"x");
        assert!(stdout.is_empty());
        // `-` and none are standard output.
        for arg in [None, Some(&FileArg::Std)] {
            let mut stdout = Vec::new();
            let mut output = Output::open(arg, &mut stdout).unwrap();
            output.write_all(b"raw\xff").unwrap();
            output.finish().unwrap();
            assert_eq!(stdout, b"raw\xff");
        }
    }

    #[test]
    fn an_output_that_cannot_be_written_is_named() {
        let dir = temp();
        let mut stdout = Vec::new();
        let nowhere = FileArg::Path(dir.path().join("no/such/dir/out"));
        let e = Output::open(Some(&nowhere), &mut stdout).err().unwrap();
        assert!(e.to_string().starts_with("writing the output to /"), "{e}");
        assert!(e.to_string().ends_with("out failed: No such file or directory (os error 2)"));
        let e = Output::open(Some(&FileArg::Path(dir.path().to_owned())), &mut stdout).err();
        assert!(e.unwrap().to_string().ends_with("Is a directory (os error 21)"));
        // A write that fails is blamed on the output, and a broken pipe stays quiet.
        let mut full = File::options().write(true).open("/dev/full").unwrap();
        let mut output = Output::open(None, &mut full).unwrap();
        let e = output.write_all(b"x").unwrap_err();
        let e = output.blame(ferrite::Error::Io { context: "streaming".into(), source: e });
        assert!(matches!(e, CliError::Output(_)), "{e}");
        assert_eq!(
            e.to_string(),
            "writing the output failed: No space left on device (os error 28)"
        );
        let mut pipe = BrokenPipe;
        let mut output = Output::open(None, &mut pipe).unwrap();
        let e = output.write_all(b"x").unwrap_err();
        assert!(output.blame(e).is_broken_pipe());
    }

    struct BrokenPipe;

    impl Write for BrokenPipe {
        fn write(&mut self, _: &[u8]) -> io::Result<usize> {
            Err(io::ErrorKind::BrokenPipe.into())
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }
}
