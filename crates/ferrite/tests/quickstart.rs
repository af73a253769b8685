//! Runs `examples/quickstart.rs` (what README shows) in a temporary directory, twice: on a
//! new directory and on the one the first run closed.

#[path = "../examples/quickstart.rs"]
#[allow(dead_code)] // its `main` is the example's, not the test's
mod quickstart;

#[test]
fn the_quickstart_example_runs() {
    let dir = tempfile::TempDir::with_prefix("quickstart").unwrap();
    let data = dir.path().join("data");
    quickstart::run(&data).expect("the example on a new directory");
    assert!(data.join(ferrite::PAGE_FILE_NAME).exists());
    // Again on what it left: the stock goes down from 3 to 2 again (the batch resets it).
    quickstart::run(&data).expect("the example on the directory it closed");
}
