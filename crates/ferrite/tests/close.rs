//! Closing never waits on a helper thread's idle timer. (The object merge thread used to
//! sleep out its 250 ms wait for work before it saw the close, so every `close` of a
//! writable database took up to a quarter second more: a `ferrite load` of 2 M entries
//! ended on quarter-second steps.) Its own binary: the wait it sets is process-wide.

mod common;

use std::sync::mpsc;
use std::time::Duration;

use common::TempDir;
use ferrite::{Db, Options};

#[test]
fn close_wakes_the_idle_merge_thread() {
    // With an hour's idle wait, a close that does not wake the thread would hang.
    ferrite::testing::set_merge_idle_wait(Duration::from_secs(3600));
    let dir = TempDir::with_prefix("close-wakes").unwrap();
    let options = Options { workers: 0, pool_bytes: 4 << 20, ..Options::default() };
    for round in 0..3 {
        let db = Db::open(dir.path(), options.clone()).unwrap();
        db.tree("t").unwrap().put(format!("k{round}"), b"v").unwrap();
        // Let the merge thread settle into its wait.
        std::thread::sleep(Duration::from_millis(20));
        let (done, closed) = mpsc::channel();
        std::thread::spawn(move || done.send(db.close()).unwrap());
        match closed.recv_timeout(Duration::from_secs(60)) {
            Ok(result) => result.unwrap(),
            Err(_) => panic!("round {round}: the close still waits for the merge thread"),
        }
    }
    let db = Db::open(dir.path(), options).unwrap();
    assert_eq!(db.tree("t").unwrap().iter().count(), 3);
}
