//! Records the commit the benchmarks are built from (`ferrite_bench::BUILD_COMMIT`), so
//! that a comparison's report names the code that ran, wherever the binary runs from and
//! whatever the checkout holds by then. Asking git at run time named the checkout's HEAD
//! instead: "unknown" for a copied binary, and the wrong commit once the checkout moved on.

use std::path::Path;
use std::process::Command;

fn git(dir: &Path, args: &[&str]) -> Option<String> {
    let out = Command::new("git").arg("-C").arg(dir).args(args).output().ok()?;
    out.status.success().then(|| String::from_utf8_lossy(&out.stdout).trim().to_owned())
}

fn main() {
    let manifest = std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR");
    let dir = Path::new(&manifest);
    let commit = match git(dir, &["rev-parse", "--short", "HEAD"]) {
        Some(hash) => {
            // Changes to the code not yet committed (documents do not count: they are
            // not in the binary).
            let status = ["status", "--porcelain", "--untracked-files=no", "--"];
            let paths = [":/crates", ":/Cargo.toml", ":/Cargo.lock"];
            let args: Vec<&str> = status.iter().chain(&paths).copied().collect();
            match git(dir, &args) {
                Some(changes) if !changes.is_empty() => format!("{hash} with changes"),
                _ => hash,
            }
        }
        // Built outside a git checkout (a source archive), or without git.
        None => "unknown".to_owned(),
    };
    println!("cargo:rustc-env=FERRITE_BUILD_COMMIT={commit}");
    // Run again when HEAD moves (a commit, a checkout) or the code changes.
    for path in ["HEAD", "packed-refs"] {
        if let Some(file) = git(dir, &["rev-parse", "--git-path", path]) {
            println!("cargo:rerun-if-changed={}", dir.join(file).display());
        }
    }
    if let Some(branch) = git(dir, &["symbolic-ref", "-q", "HEAD"]) {
        if let Some(file) = git(dir, &["rev-parse", "--git-path", &branch]) {
            println!("cargo:rerun-if-changed={}", dir.join(file).display());
        }
    }
    if let Some(top) = git(dir, &["rev-parse", "--show-toplevel"]) {
        for path in ["crates", "Cargo.toml", "Cargo.lock"] {
            println!("cargo:rerun-if-changed={}", Path::new(&top).join(path).display());
        }
    }
}
