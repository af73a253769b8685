//! `ferrite serve`: opens the data directory with workers, starts the memcached-compatible
//! server (`ferrite_server::Server`) on them, says where it listens, and waits for SIGTERM
//! or SIGINT to stop it cleanly.

// sigprocmask / sigwait: the stop signals are taken by one waiting thread, not by handlers.
#![allow(unsafe_code)]

use std::io::Write;
use std::sync::Arc;

use ferrite::io::EngineKind;
use ferrite::{Db, Options};
use ferrite_server::auth::Credentials;
use ferrite_server::{Server, ServerConfig};

use crate::cli::ServeArgs;
use crate::common::{CliError, Outcome};

/// The signals that stop the server, blocked in every thread (the workers inherit the mask
/// from the thread that starts them) and taken with `sigwait`.
fn stop_signals() -> libc::sigset_t {
    // SAFETY: `set` is a plain C struct the calls initialise and fill.
    unsafe {
        let mut set: libc::sigset_t = std::mem::zeroed();
        libc::sigemptyset(&mut set);
        libc::sigaddset(&mut set, libc::SIGTERM);
        libc::sigaddset(&mut set, libc::SIGINT);
        set
    }
}

pub fn serve(args: &ServeArgs, out: &mut dyn Write) -> Result<Outcome, CliError> {
    let signals = stop_signals();
    // SAFETY: changes this thread's signal mask, with a valid set; before any thread starts.
    unsafe { libc::pthread_sigmask(libc::SIG_BLOCK, &signals, std::ptr::null_mut()) };
    // A bad authfile is refused before anything opens.
    let auth = match &args.authfile {
        Some(path) => Some(Arc::new(
            Credentials::load(path).map_err(|e| CliError::Refused(format!("serve: {e}")))?,
        )),
        None => None,
    };
    if let Some(dir) = &args.backup_dir {
        check_backup_dir(dir, &args.db)?;
    }
    let defaults = Options::default();
    let memory = args.memory_mib << 20;
    let options = Options {
        create_if_missing: true,
        // The pool takes the memory budget but what the rest needs: the log's buffers, the
        // connections' buffers, the change buffer (a quarter, at most 64 MiB).
        pool_bytes: memory - (memory / 4).min(64 << 20),
        workers: args.workers.unwrap_or(defaults.workers),
        durability: args.durability,
        max_size_bytes: args.disk_budget_mib.map_or(defaults.max_size_bytes, |mib| mib << 20),
        // Connections are served on the workers' rings: on the fallback engines a socket
        // call would block a worker, and with it every other connection on that worker.
        engine: Some(EngineKind::IoUring),
        tier: args.tier.clone(),
        ..defaults
    };
    let db = Arc::new(Db::open(&args.db, options).map_err(|e| match e {
        ferrite::Error::Io { ref context, .. } if context.contains("io_uring") => {
            CliError::Refused(format!(
                "serve: the server needs io_uring (its workers serve connections and disk \
                 reads on their rings), and this kernel refuses it: {e}. In a container, allow \
                 the io_uring system calls in its seccomp profile."
            ))
        }
        e => CliError::Engine(e),
    })?);
    let config = ServerConfig {
        listen: args.listen,
        max_connections: args.max_connections,
        item_max_bytes: (args.item_max_mib << 20) as usize,
        idle_timeout: (args.idle_timeout_secs > 0)
            .then(|| std::time::Duration::from_secs(args.idle_timeout_secs)),
        evict: !args.store_mode,
        auth,
        // Large items' slices read lately: a part of the memory the pool leaves.
        slice_cache_bytes: (memory / 32) as usize,
        backup_dir: args.backup_dir.clone(),
    };
    let server = match Server::start(Arc::clone(&db), &config) {
        Ok(server) => server,
        Err(e) => {
            return Err(CliError::Refused(format!("serve: listening on {}: {e}", args.listen)))
        }
    };
    writeln!(out, "listening on {}", server.local_addr())?;
    out.flush()?;
    let mut signal = 0;
    // SAFETY: waits for one of the blocked signals of a valid set.
    unsafe { libc::sigwait(&signals, &mut signal) };
    server.shut_down();
    let db = Arc::into_inner(db).expect("the server's tasks are done with the database");
    db.close().map_err(CliError::Engine)?;
    writeln!(out, "stopped")?;
    out.flush()?;
    Ok(Outcome::Done)
}

/// Makes the backup directory if missing, and refuses one inside the data directory (a
/// backup there would be copied into every later backup). Paths are compared as written
/// first (so nothing is made inside the data directory), then resolved (symbolic links).
fn check_backup_dir(dir: &std::path::Path, data: &std::path::Path) -> Result<(), CliError> {
    let refuse =
        |why: String| CliError::Refused(format!("serve: --backup-dir {}: {why}", dir.display()));
    let (written, data_written) = (
        std::path::absolute(dir).map_err(|e| refuse(e.to_string()))?,
        std::path::absolute(data).map_err(|e| refuse(e.to_string()))?,
    );
    if written.starts_with(&data_written) {
        return Err(refuse(format!("it is inside the data directory {}", data.display())));
    }
    std::fs::create_dir_all(dir).map_err(|e| refuse(format!("cannot make it: {e}")))?;
    let resolved = dir.canonicalize().map_err(|e| refuse(e.to_string()))?;
    if let Ok(data) = data.canonicalize() {
        if resolved.starts_with(&data) {
            return Err(refuse(format!("it is inside the data directory {}", data.display())));
        }
    }
    Ok(())
}
