//! Real memcached clients, unchanged, against the server: libmemcached's protocol checker
//! (`memccapable`, Debian's libmemcached-tools) over the text protocol, and the Python
//! clients pymemcache and pylibmc (Debian's python3-pymemcache, python3-pylibmc). Each is
//! skipped where it is not installed, unless `FERRITE_REQUIRE_CLIENTS=1` (CI sets it): then
//! its absence fails the test.

use std::net::SocketAddr;
use std::process::Command;
use std::sync::Arc;

use ferrite::{Db, Options};
use ferrite_server::{Server, ServerConfig};

fn required() -> bool {
    std::env::var("FERRITE_REQUIRE_CLIENTS").is_ok_and(|v| v == "1")
}

/// Whether `program` runs here; if not, says so (or fails, when clients are required).
fn available(program: &str, args: &[&str], what: &str) -> bool {
    let ok = Command::new(program).args(args).output().is_ok_and(|o| o.status.success());
    if !ok {
        assert!(!required(), "FERRITE_REQUIRE_CLIENTS=1 but {what} is missing");
        eprintln!("skipped: {what} is not installed");
    }
    ok
}

fn with_server(body: impl FnOnce(SocketAddr)) {
    let dir = tempfile::tempdir().unwrap();
    let options =
        Options { workers: 2, pool_bytes: 16 << 20, create_if_missing: true, ..Options::default() };
    let db = Arc::new(Db::open(dir.path(), options).unwrap());
    let config = ServerConfig {
        listen: SocketAddr::from(([127, 0, 0, 1], 0)),
        item_max_bytes: 2 << 20,
        ..ServerConfig::default()
    };
    let server = Server::start(Arc::clone(&db), &config).unwrap();
    body(server.local_addr());
    server.shut_down();
    Arc::into_inner(db).unwrap().close().unwrap();
}

#[test]
fn libmemcached_memccapable_passes_every_text_protocol_test() {
    // (memccapable has no --version; its usage exits non-zero: look for the binary.)
    let found = Command::new("memccapable").arg("-h").output().is_ok();
    if !found {
        assert!(!required(), "FERRITE_REQUIRE_CLIENTS=1 but memccapable is missing");
        eprintln!("skipped: memccapable (libmemcached-tools) is not installed");
        return;
    }
    with_server(|addr| {
        let out = Command::new("memccapable")
            .args(["-a", "-t", "10", "-h", &addr.ip().to_string(), "-p", &addr.port().to_string()])
            .output()
            .unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned()
            + &String::from_utf8_lossy(&out.stderr);
        assert!(out.status.success() && text.contains("All tests passed"), "{text}");
    });
}

/// Sets, gets, multi-gets, cas, incr/decr, append, delete, flush, and values from 0 bytes
/// to 1.5 MiB, through each client, checked in Python.
const PYTHON_CLIENTS: &str = r#"
import sys
host, port, which = sys.argv[1], int(sys.argv[2]), sys.argv[3]
big = bytes((i * 7) % 251 for i in range(1_500_000))
if which == "pymemcache":
    from pymemcache.client.base import Client
    c = Client((host, port), connect_timeout=10, timeout=10)
    assert c.version().startswith(b"1.6")
    assert c.set("a", b"1", expire=0)
    assert c.get("a") == b"1"
    assert c.get("missing") is None
    assert c.set_many({"m1": b"x", "m2": b"y"}) == []
    assert c.get_many(["m1", "m2", "nope"]) == {"m1": b"x", "m2": b"y"}
    value, cas = c.gets("a")
    assert value == b"1"
    assert c.cas("a", b"2", cas) is True
    assert c.cas("a", b"3", cas) is False
    assert c.incr("a", 5) == 7
    assert c.decr("a", 10) == 0
    assert c.add("a", b"z", noreply=False) is False
    assert c.append("m1", b"++", noreply=False) is True
    assert c.get("m1") == b"x++"
    assert c.touch("m1", 100, noreply=False) is True
    for size in (0, 100, 4096, 70_000, len(big)):
        assert c.set("big%d" % size, big[:size])
        assert c.get("big%d" % size) == big[:size], size
    assert c.delete("a", noreply=False) is True
    assert c.delete("a", noreply=False) is False
    assert c.flush_all(noreply=False) is True
    assert c.get("m1") is None
    stats = c.stats()
    assert b"cmd_get" in stats or "cmd_get" in stats
elif which == "pylibmc":
    import pylibmc
    c = pylibmc.Client(["%s:%d" % (host, port)], binary=False)
    c.set("a", "hello")
    assert c.get("a") == "hello"
    c.set("n", 10)
    assert c.incr("n", 5) == 15
    assert c.decr("n", 20) == 0
    c.set_multi({"x": b"1", "y": b"2"})
    assert c.get_multi(["x", "y", "z"]) == {"x": b"1", "y": b"2"}
    for size in (0, 4096, 70_000, 1_000_000):
        c.set("big%d" % size, big[:size])
        assert c.get("big%d" % size) == big[:size], size
    assert c.delete("a")
    assert c.get("a") is None
    assert not c.add("x", b"3")
print("ok", which)
"#;

/// Debian's Python, which sees Debian's packages (a `python3` earlier on the PATH, say
/// pyenv's, may not).
fn python() -> &'static str {
    if std::path::Path::new("/usr/bin/python3").exists() {
        "/usr/bin/python3"
    } else {
        "python3"
    }
}

#[test]
fn python_clients_work_unchanged() {
    for (module, package) in [("pymemcache", "python3-pymemcache"), ("pylibmc", "python3-pylibmc")]
    {
        let import = format!("import {module}");
        if !available(python(), &["-c", &import], &format!("{module} ({package})")) {
            continue;
        }
        with_server(|addr| {
            let out = Command::new(python())
                .args(["-c", PYTHON_CLIENTS, &addr.ip().to_string(), &addr.port().to_string()])
                .arg(module)
                .output()
                .unwrap();
            let stdout = String::from_utf8_lossy(&out.stdout);
            assert!(
                out.status.success() && stdout.contains(&format!("ok {module}")),
                "{module}: {stdout}{}",
                String::from_utf8_lossy(&out.stderr)
            );
        });
    }
}
