//! The initial database (clause 4.3.3), written in large batches outside transactions: the
//! items, then per warehouse its stock, its districts, their customers (with the
//! last-name index and one history row each) and their orders (with order lines, the
//! order-by-customer index and the new orders of the last ones). Deterministic from the
//! seed: each warehouse draws from a generator of its own.

use super::random::{
    a_string, data_maybe_original, last_name, n_string, nurand, permutation, uniform, zip, NuRandC,
    A_C_LAST,
};
use super::schema::*;
use super::store::{TpccStore, TxnError};
use crate::gen::Rng;
use crate::measure::Progress;

/// Rows buffered for one write, handed to the store when full.
struct Batch<'a, S: TpccStore> {
    store: &'a S,
    rows: Vec<(Table, Vec<u8>, Vec<u8>)>,
    max_rows: usize,
    /// Districts loaded so far, for `progress`.
    districts: u64,
    progress: &'a mut Progress,
}

impl<S: TpccStore> Batch<'_, S> {
    fn put(&mut self, table: Table, key: Vec<u8>, value: Vec<u8>) -> Result<(), TxnError> {
        self.rows.push((table, key, value));
        if self.rows.len() >= self.max_rows {
            self.flush()?;
        }
        Ok(())
    }

    fn flush(&mut self) -> Result<(), TxnError> {
        if !self.rows.is_empty() {
            self.store.write_rows(&self.rows)?;
            self.rows.clear();
        }
        Ok(())
    }
}

/// Loads a data set of `scale` into `store` (empty) in batches of `batch_rows` rows, dated
/// `now`, counting the districts done on `progress` (`Scale::districts` of them); returns
/// its record (also written to the `meta` table, last).
pub fn load<S: TpccStore>(
    store: &S,
    scale: Scale,
    seed: u64,
    now: u64,
    batch_rows: usize,
    progress: &mut Progress,
) -> Result<DataSet, TxnError> {
    scale.check().map_err(TxnError::Failed)?;
    let c_load = NuRandC::for_load(&mut Rng::stream(seed, 0));
    let mut batch =
        Batch { store, rows: Vec::new(), max_rows: batch_rows.max(1), districts: 0, progress };
    let mut rng = Rng::stream(seed, 1);
    for i in 1..=scale.items {
        let item = Item {
            im_id: uniform(&mut rng, 1, 10_000),
            name: a_string(&mut rng, 14, 24),
            price: i64::from(uniform(&mut rng, 100, 10_000)),
            data: data_maybe_original(&mut rng),
        };
        batch.put(Table::Item, item_key(i), item.encode())?;
    }
    for w in 1..=scale.warehouses {
        load_warehouse(&mut batch, &scale, c_load, w, seed, now)?;
    }
    let set = DataSet {
        scale,
        c_last_load: c_load.c_last,
        c_id_load: c_load.c_id,
        ol_i_id_load: c_load.ol_i_id,
    };
    batch.put(Table::Meta, META_RUNS.to_vec(), 0u32.to_le_bytes().to_vec())?;
    batch.put(Table::Meta, META_DATASET.to_vec(), set.encode())?;
    batch.flush()?;
    batch.progress.finish();
    Ok(set)
}

/// H_AMOUNT of the load's history rows: 10.00.
const LOAD_PAYMENT: i64 = 1000;

/// D_YTD at load: its customers' history (30,000.00 at TPC-C's scale; condition 9).
fn district_ytd(scale: &Scale) -> i64 {
    i64::from(scale.customers) * LOAD_PAYMENT
}

fn address(rng: &mut Rng) -> Address {
    Address {
        street_1: a_string(rng, 10, 20),
        street_2: a_string(rng, 10, 20),
        city: a_string(rng, 10, 20),
        state: a_string(rng, 2, 2).to_ascii_uppercase(),
        zip: zip(rng),
    }
}

fn load_warehouse<S: TpccStore>(
    batch: &mut Batch<'_, S>,
    scale: &Scale,
    c_load: NuRandC,
    w: u16,
    seed: u64,
    now: u64,
) -> Result<(), TxnError> {
    let mut rng = Rng::stream(seed, 1 + u64::from(w));
    let warehouse = Warehouse {
        name: a_string(&mut rng, 6, 10),
        address: address(&mut rng),
        tax: uniform(&mut rng, 0, 2000) as i32,
    };
    batch.put(Table::Warehouse, warehouse_key(w), warehouse.encode())?;
    // 300,000.00 at TPC-C's scale: the districts' sum (condition 1), and the load's history
    // of the warehouse (condition 8) at any scale.
    let ytd = i64::from(DISTRICTS) * district_ytd(scale);
    batch.put(Table::WarehouseYtd, warehouse_key(w), encode_money(ytd))?;
    for i in 1..=scale.items {
        let stock = Stock {
            quantity: uniform(&mut rng, 10, 100) as i32,
            dist: std::array::from_fn(|_| a_string(&mut rng, 24, 24)),
            ytd: 0,
            order_cnt: 0,
            remote_cnt: 0,
            data: data_maybe_original(&mut rng),
        };
        batch.put(Table::Stock, stock_key(w, i), stock.encode())?;
    }
    let mut history_seq = 0;
    for d in 1..=DISTRICTS {
        let district = District {
            name: a_string(&mut rng, 6, 10),
            address: address(&mut rng),
            tax: uniform(&mut rng, 0, 2000) as i32,
        };
        batch.put(Table::District, district_key(w, d), district.encode())?;
        batch.put(Table::DistrictYtd, district_key(w, d), encode_money(district_ytd(scale)))?;
        let next_o_id = encode_order_id(scale.customers + 1);
        batch.put(Table::DistrictNextOrderId, district_key(w, d), next_o_id)?;
        for c in 1..=scale.customers {
            let last = match c <= 1000 {
                true => last_name(c - 1),
                false => last_name(nurand(&mut rng, A_C_LAST, c_load.c_last, 0, 999)),
            };
            let customer = Customer {
                first: a_string(&mut rng, 8, 16),
                middle: b"OE".to_vec(),
                last,
                address: address(&mut rng),
                phone: n_string(&mut rng, 16, 16),
                since: now,
                credit: match uniform(&mut rng, 1, 10) == 1 {
                    true => b"BC".to_vec(),
                    false => b"GC".to_vec(),
                },
                credit_lim: 5_000_000,
                discount: uniform(&mut rng, 0, 5000) as i32,
                balance: -1000,
                ytd_payment: 1000,
                payment_cnt: 1,
                delivery_cnt: 0,
                data: a_string(&mut rng, 300, 500),
            };
            let by_name = customer_by_name_key(w, d, &customer.last, &customer.first, c);
            batch.put(Table::CustomerByName, by_name, Vec::new())?;
            batch.put(Table::Customer, customer_key(w, d, c), customer.encode())?;
            history_seq += 1;
            let history = History {
                c_id: c,
                c_d_id: d,
                c_w_id: w,
                d_id: d,
                date: now,
                amount: LOAD_PAYMENT,
                data: a_string(&mut rng, 12, 24),
            };
            batch.put(Table::History, history_key(w, 0, 0, history_seq), history.encode())?;
        }
        let customers = permutation(&mut rng, scale.customers);
        let delivered = scale.customers - scale.new_orders;
        for (o, &c_id) in (1..).zip(&customers) {
            let is_delivered = o <= delivered;
            let order = Order {
                c_id,
                entry_d: now,
                carrier_id: if is_delivered { uniform(&mut rng, 1, 10) as u8 } else { 0 },
                ol_cnt: uniform(&mut rng, 5, 15) as u8,
                all_local: true,
            };
            for number in 1..=order.ol_cnt {
                let line = OrderLine {
                    i_id: uniform(&mut rng, 1, scale.items),
                    supply_w_id: w,
                    delivery_d: if is_delivered { now } else { 0 },
                    quantity: 5,
                    amount: if is_delivered { 0 } else { i64::from(uniform(&mut rng, 1, 999_999)) },
                    dist_info: a_string(&mut rng, 24, 24),
                };
                batch.put(Table::OrderLine, order_line_key(w, d, o, number), line.encode())?;
            }
            batch.put(Table::Order, order_key(w, d, o), order.encode())?;
            batch.put(Table::OrderByCustomer, order_by_customer_key(w, d, c_id, o), Vec::new())?;
            if !is_delivered {
                batch.put(Table::NewOrder, new_order_key(w, d, o), Vec::new())?;
            }
        }
        batch.districts += 1;
        batch.progress.set(batch.districts);
    }
    Ok(())
}

/// The data set's record in `store`, if a load finished there.
pub fn data_set<S: TpccStore>(store: &S) -> Result<Option<DataSet>, TxnError> {
    let mut found = None;
    let end = prefix_end(META_DATASET);
    store.for_each(Table::Meta, META_DATASET, &end, &mut |key, value| {
        if key == META_DATASET {
            found = Some(DataSet::decode(value).map_err(|e| e.to_string())?);
        }
        Ok(())
    })?;
    Ok(found)
}

/// Takes the next run number (for history keys), recording it in `meta`.
pub fn next_run<S: TpccStore>(store: &S) -> Result<u32, TxnError> {
    let mut last = 0;
    store.for_each(Table::Meta, META_RUNS, &prefix_end(META_RUNS), &mut |key, value| {
        if key == META_RUNS {
            let bytes: [u8; 4] = value.try_into().map_err(|_| "a bad run number".to_owned())?;
            last = u32::from_le_bytes(bytes);
        }
        Ok(())
    })?;
    let run = last + 1;
    store.write_rows(&[(Table::Meta, META_RUNS.to_vec(), run.to_le_bytes().to_vec())])?;
    Ok(run)
}
