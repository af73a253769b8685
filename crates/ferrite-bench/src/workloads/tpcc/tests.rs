//! TPC-C at the reduced scale: the load is consistent, a broken database is caught, a
//! single terminal leaves the same rows on Ferrite as on the model, rollbacks write nothing,
//! Delivery skips empty districts, and concurrent terminals keep the data consistent. With
//! the `peers` feature, the same on RocksDB (pessimistic) and WiredTiger: a single terminal
//! leaves the model's rows, and runs of one and of several terminals stay consistent.

use std::sync::Arc;

use ferrite::{Db, Durability, Options};
use tempfile::TempDir;

use super::check::check;
use super::load::load;
use super::model::Model;
use super::random::NuRandC;
use super::run::{run, TpccConfig};
use super::schema::*;
use super::store::{FerriteTpcc, TpccStore};
use super::txns::{execute, Clock, DeliveryTurn, Input, Kind, OrderLineInput, Outcome, Terminal};
use crate::gen::Rng;
use crate::measure::Progress;

const SEED: u64 = 11;
const NOW: u64 = 1_790_000_000;

fn ferrite(dir: &TempDir) -> FerriteTpcc {
    let options = Options {
        pool_bytes: 16 << 20,
        workers: 1,
        durability: Durability::None,
        direct_io: false,
        ..Options::default()
    };
    FerriteTpcc::new(Arc::new(Db::open(dir.path(), options).unwrap()), None).unwrap()
}

fn loaded<S: TpccStore>(store: &S, warehouses: u16) -> DataSet {
    let scale = Scale::reduced(warehouses);
    load(store, scale, SEED, NOW, 500, &mut Progress::hidden(scale.districts())).unwrap()
}

/// Every row of every table, in key order.
fn dump<S: TpccStore>(store: &S) -> Vec<Vec<(Vec<u8>, Vec<u8>)>> {
    Table::ALL
        .iter()
        .map(|&table| {
            let mut rows = Vec::new();
            store
                .for_each(table, &[], &[0xFF; 32], &mut |k, v| {
                    rows.push((k.to_vec(), v.to_vec()));
                    Ok(())
                })
                .unwrap();
            rows
        })
        .collect()
}

/// A terminal of warehouse 1 with fixed dates, as every deterministic test uses.
fn terminal(set: &DataSet, seed: u64) -> Terminal {
    let load_c =
        NuRandC { c_last: set.c_last_load, c_id: set.c_id_load, ol_i_id: set.ol_i_id_load };
    let run_c = NuRandC::for_run(load_c, &mut Rng::new(seed));
    Terminal::new(1, 1, 1, 1, seed, run_c, set.scale, Clock::Fixed(NOW + 100))
}

/// Runs `inputs` one after the other on Ferrite's worker, in one task.
fn on_ferrite(store: &FerriteTpcc, inputs: Vec<Input>, scale: Scale) -> Vec<Outcome> {
    // (By value: the inputs move into the task.)
    let task_store = store.clone();
    let handle = store.db.spawn(async move {
        let mut outcomes = Vec::new();
        for input in &inputs {
            outcomes.push(execute(&task_store, input, &scale).await.unwrap());
        }
        outcomes
    });
    handle.unwrap().wait()
}

/// Runs `inputs` one after the other on this thread (the model, the peers).
fn on_thread<S: TpccStore>(store: &S, inputs: &[Input], scale: Scale) -> Vec<Outcome> {
    inputs
        .iter()
        .map(|input| ferrite::sched::block_on(execute(store, input, &scale)).unwrap())
        .collect()
}

fn on_model(model: &Model, inputs: &[Input], scale: Scale) -> Vec<Outcome> {
    on_thread(model, inputs, scale)
}

#[test]
fn the_load_is_consistent_and_a_broken_database_fails_the_right_check() {
    let dir = TempDir::new().unwrap();
    let store = ferrite(&dir);
    let set = loaded(&store, 2);
    assert_eq!(set.scale, Scale::reduced(2));
    assert_eq!(check(&store, &set.scale).unwrap(), vec![]);
    let model = Model::new();
    loaded(&model, 2);
    assert!(dump(&store) == dump(&model), "the load is deterministic on every store");

    // A district's next order id moved: condition 2, and only it.
    let next = store.tree(Table::DistrictNextOrderId);
    let key = district_key(2, 3);
    let next_o_id = decode_order_id(&next.get(&key).unwrap().unwrap()).unwrap();
    next.put(&key, encode_order_id(next_o_id + 1)).unwrap();
    let violations = check(&store, &set.scale).unwrap();
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0].condition, 2);
    assert!(violations[0].what.contains("(2, 3)"), "{}", violations[0]);

    // A warehouse's year-to-date changed: conditions 1 and 8.
    let ytd = store.tree(Table::WarehouseYtd);
    let w_ytd = decode_money(&ytd.get(warehouse_key(1)).unwrap().unwrap()).unwrap();
    ytd.put(warehouse_key(1), encode_money(w_ytd + 1)).unwrap();
    let mut conditions: Vec<u8> =
        check(&store, &set.scale).unwrap().iter().map(|v| v.condition).collect();
    conditions.sort_unstable();
    assert_eq!(conditions, vec![1, 2, 8]);

    // A new order deleted from the middle: conditions 3 and 5.
    store.tree(Table::NewOrder).delete(new_order_key(1, 5, 25)).unwrap();
    let conditions: Vec<u8> =
        check(&store, &set.scale).unwrap().iter().map(|v| v.condition).collect();
    assert!(conditions.contains(&3) && conditions.contains(&5), "{conditions:?}");

    // A customer's balance and year-to-date payment moved together (12 still holds), so
    // the balance no longer matches the history's payments: condition 10, at that customer.
    let customers = store.tree(Table::Customer);
    let key = customer_key(2, 7, 11);
    let mut customer = Customer::decode(&customers.get(&key).unwrap().unwrap()).unwrap();
    customer.balance += 500;
    customer.ytd_payment -= 500;
    customers.put(&key, customer.encode()).unwrap();
    let tens: Vec<String> = check(&store, &set.scale)
        .unwrap()
        .iter()
        .filter(|v| v.condition == 10)
        .map(|v| v.what.clone())
        .collect();
    assert_eq!(tens.len(), 1, "{tens:?}");
    assert!(tens[0].contains("(2, 7) customer 11"), "{}", tens[0]);
}

/// One terminal, a fixed seed: `store` (run by `on_store`) and the model end with the same
/// rows in every table, and both are consistent.
fn same_rows_as_the_model<S: TpccStore>(
    store: &S,
    on_store: impl Fn(&S, Vec<Input>, Scale) -> Vec<Outcome>,
) {
    let model = Model::new();
    let set = loaded(store, 2);
    assert_eq!(loaded(&model, 2), set);
    let loaded_rows = dump(store);
    let mut draws = terminal(&set, 5);
    let inputs: Vec<Input> = (0..400).map(|_| draws.next_input()).collect();
    for kind in Kind::ALL {
        assert!(inputs.iter().any(|i| i.kind() == kind), "{kind:?} drawn");
    }
    let on_reference = on_model(&model, &inputs, set.scale);
    let on_store = on_store(store, inputs, set.scale);
    assert_eq!(on_store, on_reference);
    assert!(on_store.iter().all(|o| o.conflicts == 0), "one terminal never conflicts");
    let after = dump(store);
    assert!(after != loaded_rows, "the run changed the tables");
    assert!(after == dump(&model), "every table the same on both");
    assert_eq!(check(store, &set.scale).unwrap(), vec![]);
    assert_eq!(check(&model, &set.scale).unwrap(), vec![]);
}

#[test]
fn a_single_terminal_leaves_the_same_rows_on_ferrite_and_on_the_model() {
    let dir = TempDir::new().unwrap();
    same_rows_as_the_model(&ferrite(&dir), on_ferrite);
}

#[test]
fn a_rolled_back_new_order_writes_nothing() {
    let dir = TempDir::new().unwrap();
    let store = ferrite(&dir);
    let set = loaded(&store, 1);
    let before = dump(&store);
    let lines = |last: u32| {
        [1, 2, last].map(|i_id| OrderLineInput { i_id, supply_w: 1, quantity: 3 }).to_vec()
    };
    let unused = set.scale.items + 1;
    let rollback = Input::NewOrder { w: 1, d: 4, c_id: 7, lines: lines(unused), entry_d: NOW };
    let outcomes = on_ferrite(&store, vec![rollback], set.scale);
    assert!(outcomes[0].rolled_back);
    assert!(dump(&store) == before, "nothing written");
    // The same order with a real item commits: three lines more, a new order more.
    let order = Input::NewOrder { w: 1, d: 4, c_id: 7, lines: lines(3), entry_d: NOW };
    assert!(!on_ferrite(&store, vec![order], set.scale)[0].rolled_back);
    let after = dump(&store);
    let rows = |dump: &[Vec<(Vec<u8>, Vec<u8>)>], table: Table| dump[table.index()].len();
    assert_eq!(rows(&after, Table::OrderLine), rows(&before, Table::OrderLine) + 3);
    assert_eq!(rows(&after, Table::NewOrder), rows(&before, Table::NewOrder) + 1);
    assert_eq!(check(&store, &set.scale).unwrap(), vec![]);
}

/// An item ordered twice in one New-Order takes its stock twice: the second line reads the
/// row as the first line left it (the stock rows are read all at once, before either line
/// writes). Its year-to-date grows by both quantities and its order count by two.
#[test]
fn an_item_ordered_twice_takes_its_stock_twice() {
    let dir = TempDir::new().unwrap();
    let store = ferrite(&dir);
    let set = loaded(&store, 1);
    let stock = |store: &FerriteTpcc| {
        let value = store.tree(Table::Stock).get(stock_key(1, 5)).unwrap().unwrap();
        Stock::decode(&value).unwrap()
    };
    let before = stock(&store);
    let lines = [(5, 3), (2, 1), (5, 4)]
        .map(|(i_id, quantity)| OrderLineInput { i_id, supply_w: 1, quantity })
        .to_vec();
    let order = Input::NewOrder { w: 1, d: 4, c_id: 7, lines, entry_d: NOW };
    assert!(!on_ferrite(&store, vec![order], set.scale)[0].rolled_back);
    let after = stock(&store);
    assert_eq!(after.ytd, before.ytd + 7);
    assert_eq!(after.order_cnt, before.order_cnt + 2);
    let taken = |q: i32, n: i32| if q >= n + 10 { q - n } else { q - n + 91 };
    assert_eq!(after.quantity, taken(taken(before.quantity, 3), 4));
    assert_eq!(check(&store, &set.scale).unwrap(), vec![]);
}

#[test]
fn delivery_skips_districts_without_new_orders() {
    let dir = TempDir::new().unwrap();
    let store = ferrite(&dir);
    let set = loaded(&store, 1);
    let delivery = Input::Delivery { w: 1, carrier: 3, date: NOW + 5 };
    let rounds = set.scale.new_orders as usize + 1;
    let outcomes = on_ferrite(&store, vec![delivery; rounds], set.scale);
    assert!(outcomes[..rounds - 1].iter().all(|o| o.skipped == 0));
    assert_eq!(outcomes[rounds - 1].skipped, DISTRICTS, "every district empty at the end");
    assert_eq!(dump(&store)[Table::NewOrder.index()], vec![]);
    assert_eq!(check(&store, &set.scale).unwrap(), vec![]);
    let status = Input::StockLevel { w: 1, d: 2, threshold: 20 };
    let low = on_ferrite(&store, vec![status], set.scale)[0].low_stock;
    assert!(low <= 20 * 15, "{low}");
}

#[test]
fn the_mix_and_the_remote_shares_are_the_specs() {
    let set =
        DataSet { scale: Scale::spec(10), c_last_load: 100, c_id_load: 200, ol_i_id_load: 300 };
    let mut t = terminal(&set, 9);
    let (mut kinds, mut lines, mut remote_lines, mut payments, mut remote_payments) =
        ([0u32; 5], 0, 0, 0, 0);
    let mut rollbacks = 0;
    for _ in 0..40_000 {
        let input = t.next_input();
        kinds[input.kind().index()] += 1;
        match input {
            Input::NewOrder { lines: l, .. } => {
                assert!((5..=15).contains(&l.len()));
                rollbacks += u32::from(l.last().unwrap().i_id == 100_001);
                lines += l.len();
                remote_lines += l.iter().filter(|l| l.supply_w != 1).count();
            }
            Input::Payment { w, c_w, amount, .. } => {
                assert!((100..=500_000).contains(&amount) && w == 1);
                payments += 1;
                remote_payments += u32::from(c_w != 1);
            }
            _ => {}
        }
    }
    let percent = kinds.map(|n| (f64::from(n) / 400.0).round() as u32);
    assert_eq!(percent, [45, 43, 4, 4, 4]);
    let share = |part: f64, all: f64| 100.0 * part / all;
    let remote = share(remote_lines as f64, lines as f64);
    assert!((0.7..1.3).contains(&remote), "{remote} % remote lines");
    let remote = share(f64::from(remote_payments), f64::from(payments));
    assert!((13.5..16.5).contains(&remote), "{remote} % remote payments");
    let rollback = share(f64::from(rollbacks), f64::from(kinds[0]));
    assert!((0.6..1.4).contains(&rollback), "{rollback} % rollbacks");
}

/// The names of a tpcc result line's fields, in order: the contract scripts read, new fields
/// only ever appended (`disk`: the device's fields; `cache`: the store counts its cache's
/// hits, the peers; `log`: Ferrite's log counters).
fn result_fields(disk: bool, cache: bool, log: bool) -> Vec<String> {
    let mut names: Vec<String> = [
        "store",
        "workload",
        "warehouses",
        "tx_per_s",
        "tpmc",
        "reads_per_tx",
        "writes_per_tx",
        "consistency",
        "scale",
        "ops_per_s",
        "tx",
        "seconds",
        "cpu_us_per_tx",
    ]
    .map(String::from)
    .to_vec();
    if disk {
        names.extend(["disk_reads_per_tx", "disk_writes_per_tx"].map(String::from));
    }
    for kind in Kind::ALL {
        let name = kind.name();
        names.push(name.to_owned());
        names.extend(["p50_us", "p99_us", "conflicts"].map(|f| format!("{name}_{f}")));
    }
    names.extend(
        [
            "rollbacks",
            "isolation",
            "durability",
            "no_log",
            "affinity",
            "spec_times",
            "terminals",
            "workers",
            "cache_mib",
            "seed",
            "io_source",
        ]
        .map(String::from),
    );
    if cache {
        names.push("cache_hit_ratio".into());
    }
    if disk {
        names.push("bytes_per_read".into());
    }
    if log {
        // Ferrite's: its log's counters, and the time each type's transactions ran on a
        // worker.
        names.extend(["log_kib_per_tx", "images_per_tx", "checkpoints"].map(String::from));
        names.extend(Kind::ALL.map(|kind| format!("{}_run_us", kind.name())));
    }
    names
}

/// Several terminals per warehouse on two workers, with affinity and without (then with
/// durable commits): the data stay consistent and the report says so.
#[test]
fn concurrent_terminals_keep_the_data_consistent() {
    let dir = TempDir::new().unwrap();
    for affinity in [true, false] {
        let config = TpccConfig {
            dir: dir.path().join("tpcc"),
            warehouses: 2,
            reduced: true,
            cache_mib: 16,
            seconds: 0.6,
            workers: 2,
            terminals_per_warehouse: 4,
            affinity,
            sync: !affinity,
            // The second run checkpoints every 256 KiB of log: page images follow.
            checkpoint_bytes: (!affinity).then_some(256 << 10),
            direct_io: false,
            keep: affinity,
            json: Some(dir.path().join("runs.jsonl")),
            ..TpccConfig::default()
        };
        let report = run(&config, false).unwrap();
        let log = report.log.expect("Ferrite's log counters");
        // (Not `bytes >= appended`: unsynced commits may still wait for a flush at the end.)
        assert!(log.appended > 0, "{log:?}");
        assert!(log.image_bytes <= log.appended, "{log:?}");
        if !affinity {
            assert!(log.checkpoints > 0 && log.images > 0, "{log:?}");
            assert!(log.image_bytes >= log.images * 1000, "images hold pages: {log:?}");
        }
        assert!(report.summary().contains("page images per transaction"), "{}", report.summary());
        // Every transaction is a task here: each type's time on a worker is counted, and is
        // at most the time the run's transactions took in all.
        let counted: u64 = report.tally.iter().map(|t| t.run_counted).sum();
        assert_eq!(counted, report.transactions());
        let run_s = report.tally.iter().map(|t| t.run_ns).sum::<u64>() as f64 / 1e9;
        assert!(run_s > 0.0 && run_s <= 2.0 * report.seconds * 1.05, "{run_s} s on 2 workers");
        let result = report.result_line();
        let new_order_run = result.get("new_order_run_us").unwrap().parse::<f64>().unwrap();
        assert!(new_order_run > 0.0, "{result}");
        assert!(report.consistent(), "{}", report.summary());
        assert_eq!(report.load_seconds.is_some(), affinity, "the second run reuses the load");
        assert!(report.transactions() > 0);
        let line = report.result_line();
        assert_eq!(line.get("consistency"), Some("ok"));
        assert_eq!(line.get("scale"), Some("reduced"));
        assert_eq!(line.get("durability"), Some(if affinity { "none" } else { "sync" }));
        assert!(report.summary().contains("NOT TPC-C"), "{}", report.summary());
        let fields: Vec<&str> = line.fields().iter().map(|(n, _)| n.as_str()).collect();
        // Ferrite's pool counts no hits: no cache_hit_ratio, and the summary says why.
        assert_eq!(fields, result_fields(report.disk.is_some(), false, true), "{line}");
        assert!(report.summary().contains("cache hit ratio: not counted (the pool"));
        assert_eq!(
            line.get("bytes_per_read").map(str::to_owned),
            report.disk.as_ref().map(|(_, d)| d.bytes_per_read().to_string())
        );
    }
    assert!(!dir.path().join("tpcc").exists(), "removed without --keep");
    let json = std::fs::read_to_string(dir.path().join("runs.jsonl")).unwrap();
    assert_eq!(json.lines().count(), 2);
}

/// `--disk-read-iops` / `--disk-write-iops`: where the machine has a block-I/O cgroup (and
/// the right to make one), the run is held in one and says so, in the summary and at the end
/// of the result line; elsewhere the run is refused with the reason.
#[test]
fn a_run_on_a_capped_disk_says_so() {
    use crate::measure::diskcap::{IopsCap, TEST_GROUP};
    let _alone = TEST_GROUP.lock().unwrap_or_else(|poisoned| poisoned.into_inner());
    let dir = TempDir::new().unwrap();
    let config = TpccConfig {
        disk_cap: IopsCap { read: Some(1_000_000), write: Some(900_000) },
        ..TpccConfig::short_test_run(dir.path().join("tpcc"))
    };
    match run(&config, false) {
        Ok(report) => {
            assert!(report.consistent());
            let summary = report.summary();
            let held = "capped at reads 1,000,000/s, writes 900,000/s by a block-I/O cgroup";
            assert!(summary.contains(held), "{summary}");
            let line = report.result_line().to_string();
            let last = "disk_read_iops_cap=1000000 disk_write_iops_cap=900000";
            assert!(line.ends_with(last), "{line}");
        }
        Err(crate::error::BenchError::Config(reason)) => eprintln!("no disk cap here: {reason}"),
        Err(other) => panic!("{other}"),
    }
}

/// With the specification's keying and think times, a terminal waits seconds before each
/// transaction: a short run completes none, and the waits end when the run does.
#[test]
fn spec_times_wait_and_stop_with_the_run() {
    let dir = TempDir::new().unwrap();
    let config = TpccConfig {
        seconds: 0.4,
        spec_times: true,
        no_log: true,
        ..TpccConfig::short_test_run(dir.path().join("tpcc"))
    };
    let start = std::time::Instant::now();
    let report = run(&config, false).unwrap();
    assert_eq!(report.transactions(), 0, "the shortest keying time is 2 s");
    assert!(start.elapsed() < std::time::Duration::from_secs(20), "the waits stopped");
    assert!(report.consistent());
    assert_eq!(report.result_line().get("spec_times"), Some("1"));
    assert_eq!(report.result_line().get("no_log"), Some("1"));
    assert!(report.summary().contains("Ferrite cannot turn its log off"), "{}", report.summary());
}

/// With affinity the terminals of one warehouse run on one worker, the other runs none;
/// without, both run terminals.
#[test]
fn affinity_places_a_warehouse_on_one_worker() {
    let dir = TempDir::new().unwrap();
    for affinity in [true, false] {
        let config = TpccConfig {
            dir: dir.path().join("tpcc"),
            reduced: true,
            cache_mib: 16,
            seconds: 0.4,
            workers: 2,
            terminals_per_warehouse: 4,
            affinity,
            direct_io: false,
            keep: true,
            ..TpccConfig::default()
        };
        let report = run(&config, false).unwrap();
        let shares = &report.worker_task_shares;
        assert_eq!(shares.len(), 2);
        let least = shares.iter().copied().fold(f64::MAX, f64::min);
        match affinity {
            true => assert!(least < 0.02, "{shares:?}"),
            false => assert!(least > 0.05, "{shares:?}"),
        }
        assert!(report.summary().contains("running tasks, per worker: "));
    }
}

#[cfg(feature = "peers")]
mod peers {
    use std::sync::Arc;

    use ferrite_peers::{Peer, RocksDb, WiredTiger};
    use tempfile::TempDir;

    use super::super::peer::{peer_config, PeerTpcc};
    use super::*;
    use crate::stores::StoreKind;

    const PEERS: [StoreKind; 2] = [StoreKind::RocksDb, StoreKind::WiredTiger];

    /// `kind` in `dir`, as a run opens it (small cache, buffered I/O).
    fn peer(kind: StoreKind, dir: &TempDir) -> PeerTpcc {
        let config =
            TpccConfig { store: kind, cache_mib: 16, direct_io: false, ..TpccConfig::default() };
        let options = peer_config(&config);
        let peer: Arc<dyn Peer> = match kind {
            StoreKind::RocksDb => Arc::new(RocksDb::open(dir.path(), &options).unwrap()),
            _ => Arc::new(WiredTiger::open(dir.path(), &options).unwrap()),
        };
        PeerTpcc::new(peer)
    }

    #[test]
    fn a_single_terminal_leaves_the_same_rows_on_each_peer_and_on_the_model() {
        for kind in PEERS {
            let dir = TempDir::new().unwrap();
            let store = peer(kind, &dir);
            assert!(store.isolation().contains(if kind == StoreKind::RocksDb {
                "pessimistic"
            } else {
                "snapshot isolation"
            }));
            same_rows_as_the_model(&store, |s, inputs, scale| on_thread(s, &inputs, scale));
        }
    }

    /// One terminal, then four, on a warehouse at the reduced scale: every run ends
    /// consistent, the second reuses the kept load, and the line names the store and where
    /// its reads per transaction come from.
    #[test]
    fn runs_on_each_peer_stay_consistent() {
        for kind in PEERS {
            let dir = TempDir::new().unwrap();
            for (terminals, keep) in [(1, true), (4, false)] {
                let config = TpccConfig {
                    store: kind,
                    dir: dir.path().join("tpcc"),
                    warehouses: 1,
                    reduced: true,
                    cache_mib: 16,
                    seconds: 0.4,
                    terminals_per_warehouse: terminals,
                    direct_io: false,
                    keep,
                    json: Some(dir.path().join("runs.jsonl")),
                    ..TpccConfig::default()
                };
                let report =
                    run(&config, false).unwrap_or_else(|e| panic!("tpcc on {}: {e}", kind.name()));
                let summary = report.summary();
                assert!(report.consistent(), "{summary}");
                assert_eq!(report.load_seconds.is_some(), keep, "the second run reuses the load");
                assert!(report.transactions() > 0, "{summary}");
                assert!(report.worker_task_shares.is_empty() && report.worker_count.is_none());
                assert!(summary.contains("each on a thread of its own"), "{summary}");
                assert!(summary.contains(&format!("store: {}", kind.name())), "{summary}");
                let line = report.result_line();
                assert_eq!(line.get("store"), Some(kind.name()));
                assert_eq!(line.get("consistency"), Some("ok"));
                assert!(matches!(line.get("io_source"), Some("device" | "unknown")));
                assert_eq!(line.get("terminals"), Some(terminals.to_string().as_str()));
                assert_eq!(line.get("affinity"), Some("0"), "no workers to place terminals on");
                // The peer's own counters over the window: its cache's hit ratio last but
                // one (bytes_per_read last, where the device is known).
                let fields: Vec<&str> = line.fields().iter().map(|(n, _)| n.as_str()).collect();
                assert_eq!(
                    fields,
                    super::result_fields(report.disk.is_some(), true, false),
                    "{line}"
                );
                let ratio: f64 = line.get("cache_hit_ratio").unwrap().parse().unwrap();
                assert!((0.0..=1.0).contains(&ratio), "{line}");
                assert!(summary.contains("cache hit ratio: "), "{summary}");
                assert!(summary.contains(&format!("{} counters in the window: ", kind.name())));
                let stats = report.store_stats.as_ref().unwrap();
                assert!(stats.cache.unwrap().lookups > 0, "{summary}");
                if terminals == 1 {
                    let conflicts: u64 = report.tally.iter().map(|t| t.conflicts).sum();
                    assert_eq!(conflicts, 0, "one terminal never conflicts");
                }
            }
            assert!(!dir.path().join("tpcc").exists(), "removed without --keep");
        }
    }

    /// LMDB has no transactions adapter: refused before anything is made.
    #[test]
    fn lmdb_is_refused() {
        let config = TpccConfig { store: StoreKind::Lmdb, ..TpccConfig::default() };
        let e = config.validate().unwrap_err();
        assert!(e.contains("lmdb has no transactions adapter"), "{e}");
    }

    /// `--checkpoint-mib` is Ferrite's: a peer run refuses it.
    #[test]
    fn a_peer_refuses_a_checkpoint_interval() {
        let config = TpccConfig {
            store: StoreKind::RocksDb,
            checkpoint_bytes: Some(1 << 30),
            ..TpccConfig::default()
        };
        let e = config.validate().unwrap_err();
        assert!(e.contains("--checkpoint-mib sets Ferrite's checkpoints only"), "{e}");
        assert!(TpccConfig { checkpoint_bytes: None, ..config }.validate().is_ok());
    }
}

/// Deliveries of one warehouse take turns: a second waits until the first is done, one of
/// another warehouse does not.
#[test]
fn deliveries_of_a_warehouse_take_turns() {
    use std::sync::atomic::{AtomicBool, Ordering};
    let model = Model::new();
    let first = ferrite::sched::block_on(DeliveryTurn::take(&model, MAX_TEST_WAREHOUSE));
    // Another warehouse's turn is free.
    drop(ferrite::sched::block_on(DeliveryTurn::take(&model, MAX_TEST_WAREHOUSE - 1)));
    let second_ran = Arc::new(AtomicBool::new(false));
    let waiter = {
        let (model, second_ran) = (model.clone(), Arc::clone(&second_ran));
        std::thread::spawn(move || {
            let turn = ferrite::sched::block_on(DeliveryTurn::take(&model, MAX_TEST_WAREHOUSE));
            second_ran.store(true, Ordering::SeqCst);
            drop(turn);
        })
    };
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert!(!second_ran.load(Ordering::SeqCst), "two Deliveries of one warehouse at once");
    drop(first);
    waiter.join().unwrap();
    assert!(second_ran.load(Ordering::SeqCst));
}

/// A warehouse no other test uses (the turns are process-wide).
const MAX_TEST_WAREHOUSE: u16 = super::run::MAX_WAREHOUSES;

/// The summary's reads by table: the window's pages per table (names without `tpcc.`, most
/// first, tables not read in the window left out), and the tables under 1 % together.
#[test]
fn reads_by_table_are_the_windows_and_small_ones_go_together() {
    use super::report::by_table;
    use super::run::reads_since;
    let named = |pairs: &[(&str, u64)]| -> Vec<(String, u64)> {
        pairs.iter().map(|&(n, p)| (n.to_owned(), p)).collect()
    };
    let before = named(&[("tpcc.stock", 100), ("tpcc.item", 50), ("(catalog)", 3)]);
    let after = named(&[
        ("tpcc.stock", 700),
        ("tpcc.customer", 300),
        ("tpcc.item", 50),
        ("(catalog)", 4),
        ("tpcc.order", 2),
    ]);
    let window = reads_since(&before, &after);
    assert_eq!(window, named(&[("stock", 600), ("customer", 300), ("order", 2), ("(catalog)", 1)]));
    // 903 pages over 100 transactions.
    let line = by_table(&window, |pages| pages as f64 / 100.0);
    assert_eq!(line, "stock 6.00 (66 %), customer 3.00 (33 %), others 0.03 (0.3 %)");
    assert_eq!(by_table(&[], |p| p as f64), "");
}

/// The summary's census of the pool: pages per table with their share and dirty share, the
/// tables under 1 % together.
#[test]
fn the_pool_census_shows_shares_and_dirty_pages() {
    use super::report::in_pool;
    let census: Vec<(String, u64, u64)> = [("stock", 600, 540), ("item", 390, 0), ("order", 6, 3)]
        .iter()
        .map(|&(n, p, d)| (n.to_owned(), p, d))
        .collect();
    assert_eq!(
        in_pool(&census),
        "stock 600 (60 %, 90 % dirty), item 390 (39 %, 0 % dirty), others 6 (0.6 %, 50 % dirty)"
    );
    assert_eq!(in_pool(&[]), "");
}
