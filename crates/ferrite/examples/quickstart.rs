//! Ferrite in one page: open a data directory, write and read a tree, scan a range and a
//! prefix, commit a batch and a transaction, read a snapshot, run a lookup as a task, write
//! part of an object, close.
//!
//! ```sh
//! cargo run --example quickstart -p ferrite-kv -- /tmp/quickstart-data
//! ```
//!
//! The tests run it too (`tests/quickstart.rs`), so what README shows keeps working.

use std::path::Path;

use ferrite::{Db, Error, Options, WriteBatch};

fn main() -> ferrite::Result<()> {
    let dir = std::env::args().nth(1).unwrap_or_else(|| "quickstart-data".into());
    run(Path::new(&dir))
}

/// Everything the example does, in the data directory `dir` (made if missing).
pub fn run(dir: &Path) -> ferrite::Result<()> {
    let db = Db::open(dir, Options { pool_bytes: 64 << 20, ..Options::default() })?;
    let orders = db.tree("orders")?; // created if missing
    orders.put("order-0001", "two apples")?; // keys and values: &str, &[u8], Vec<u8>, …
    assert_eq!(orders.get(b"order-0001")?.as_deref(), Some(&b"two apples"[..]));
    orders.update("order-0001", |value| value[0] = b'T')?; // in place, atomically
    for entry in orders.range("order-".."order-9") {
        let (key, value) = entry?;
        println!("{} = {}", String::from_utf8_lossy(&key), String::from_utf8_lossy(&value));
    }
    assert_eq!(orders.prefix("order-0001").count(), 1); // the keys that start with it
    assert_eq!(orders.first()?, Some((b"order-0001".to_vec(), b"Two apples".to_vec())));

    // Changes to several trees commit together.
    let stock = db.tree("stock")?;
    let mut batch = WriteBatch::new();
    batch.put(&stock, b"apples", [3]);
    batch.put(&orders, b"order-0002", b"reserved");
    db.write(&batch)?;

    // A snapshot reads every tree as of one moment, while writers go on.
    let before = db.snapshot()?;

    // A transaction commits only if nothing it read changed meanwhile (serializable).
    loop {
        let mut txn = db.transaction();
        let left = txn.get(&stock, b"apples")?.map_or(0, |v| v[0]);
        if left == 0 {
            break;
        }
        txn.put(&stock, b"apples", [left - 1])?;
        txn.put(&orders, b"order-0002", b"one apple")?;
        match txn.commit() {
            // Someone changed the stock meanwhile: run it again.
            Err(Error::Conflict { .. }) => continue,
            other => break other?,
        }
    }
    assert_eq!(stock.get(b"apples")?, Some(vec![2]));
    assert_eq!(before.get(&stock, b"apples")?, Some(vec![3])); // as it was then
    drop(before); // the page copies it needed are dropped with it

    // Work can run as tasks on Ferrite's own workers, where a miss is a queued read
    // instead of a blocked thread.
    let tasks_orders = orders.clone();
    let handle = db.spawn(async move { tasks_orders.get_async("order-0002").await })?;
    assert_eq!(handle.wait()?.as_deref(), Some(&b"one apple"[..]));

    // Values of any size are objects, written and read at any offset.
    let images = db.tree("images")?;
    let block = vec![7u8; 4096];
    images.write_at("image-7", 4096, &block)?; // bytes 0..4096 read as zeros
    let mut head = [1u8; 8];
    assert_eq!(images.read_at(b"image-7", 4092, &mut head)?, Some(8));
    assert_eq!(head, [0, 0, 0, 0, 7, 7, 7, 7]);
    assert_eq!(images.object_len(b"image-7")?, Some(8192));

    db.close() // writes every page back
}
