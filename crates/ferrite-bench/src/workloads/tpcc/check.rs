//! The consistency conditions of clause 3.3.2, checked over a whole data set outside any
//! transaction (after the load and after a run, with no terminal running):
//!
//! | # | condition (per warehouse, or per district)                                      |
//! |---|----------------------------------------------------------------------------------|
//! | 1 | W_YTD = sum(D_YTD)                                                               |
//! | 2 | D_NEXT_O_ID - 1 = max(O_ID) = max(NO_O_ID)                                       |
//! | 3 | max(NO_O_ID) - min(NO_O_ID) + 1 = number of new-order rows                       |
//! | 4 | sum(O_OL_CNT) = number of order lines                                            |
//! | 5 | O_CARRIER_ID is null exactly for the orders with a new-order row                 |
//! | 6 | each order's O_OL_CNT = its number of order lines                                |
//! | 7 | OL_DELIVERY_D is null exactly for the lines of orders whose carrier is null      |
//! | 8 | W_YTD = sum(H_AMOUNT) of its history                                             |
//! | 9 | D_YTD = sum(H_AMOUNT) of its history                                             |
//! | 10 | C_BALANCE = sum(OL_AMOUNT) of the customer's delivered lines - sum(H_AMOUNT) of |
//! |    | the customer's payments (in any warehouse's history)                           |
//! | 12 | C_BALANCE + C_YTD_PAYMENT = sum(OL_AMOUNT) of the customer's delivered lines   |
//!
//! and, for the two indexes this schema adds: every customer and order has its index
//! entry and every index entry its row ("index" in the output). Condition 10 reads the
//! whole history first, keeping one sum per customer who paid (a remote payment's row lies
//! in the paying warehouse's history). Condition 11 is not checked: it holds only until
//! the first Delivery.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use super::schema::*;
use super::store::{Entries, TpccStore, TxnError};

/// A condition that does not hold, and where.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Violation {
    /// Its number in clause 3.3.2, or 0 for the indexes.
    pub condition: u8,
    pub what: String,
}

impl std::fmt::Display for Violation {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.condition {
            0 => write!(f, "index: {}", self.what),
            n => write!(f, "condition {n}: {}", self.what),
        }
    }
}

/// The conditions checked, by number.
pub const CHECKED: [u8; 11] = [1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 12];

/// Checks every condition over `scale`'s warehouses; returns the violations found (none:
/// consistent). A row that does not decode is an error.
pub fn check<S: TpccStore>(store: &S, scale: &Scale) -> Result<Vec<Violation>, TxnError> {
    let mut found = Vec::new();
    let payments = payments_by_customer(store)?;
    for w in 1..=scale.warehouses {
        check_warehouse(store, w, &payments, &mut found)?;
    }
    Ok(found)
}

/// Sum(H_AMOUNT) per customer (warehouse, district, customer), over every warehouse's
/// history.
type Payments = HashMap<(u16, u8, u32), i64>;

fn payments_by_customer<S: TpccStore>(store: &S) -> Result<Payments, TxnError> {
    let mut payments = Payments::new();
    // (History keys begin with H_W_ID, at most MAX_WAREHOUSES: below 0xffff.)
    store.for_each(Table::History, &[], &[0xff, 0xff], &mut |_, v| {
        let h = History::decode(v).map_err(|e| e.to_string())?;
        *payments.entry((h.c_w_id, h.c_d_id, h.c_id)).or_default() += h.amount;
        Ok(())
    })?;
    Ok(payments)
}

/// Every entry of `table` whose key starts with `prefix`.
fn entries<S: TpccStore>(store: &S, table: Table, prefix: &[u8]) -> Result<Entries, TxnError> {
    let mut all = Vec::new();
    store.for_each(table, prefix, &prefix_end(prefix), &mut |k, v| {
        all.push((k.to_vec(), v.to_vec()));
        Ok(())
    })?;
    Ok(all)
}

/// The value of `key` in `table`.
fn value<S: TpccStore>(store: &S, table: Table, key: &[u8]) -> Result<Option<Vec<u8>>, TxnError> {
    let mut found = None;
    store.for_each(table, key, &prefix_end(key), &mut |k, v| {
        if k == key {
            found = Some(v.to_vec());
        }
        Ok(())
    })?;
    Ok(found)
}

fn failed(e: BadRow) -> TxnError {
    TxnError::from(e)
}

fn check_warehouse<S: TpccStore>(
    store: &S,
    w: u16,
    payments: &Payments,
    found: &mut Vec<Violation>,
) -> Result<(), TxnError> {
    let mut violation = |condition, what: String| found.push(Violation { condition, what });
    let Some(w_ytd) = value(store, Table::WarehouseYtd, &warehouse_key(w))? else {
        violation(1, format!("warehouse {w} has no W_YTD"));
        return Ok(());
    };
    let w_ytd = decode_money(&w_ytd).map_err(failed)?;
    // History by district of the payment (H_W_ID is the key's first column).
    let mut history_w = 0i64;
    let mut history_d: BTreeMap<u8, i64> = BTreeMap::new();
    store.for_each(
        Table::History,
        &warehouse_key(w),
        &prefix_end(&warehouse_key(w)),
        &mut |_, v| {
            let h = History::decode(v).map_err(|e| e.to_string())?;
            history_w += h.amount;
            *history_d.entry(h.d_id).or_default() += h.amount;
            Ok(())
        },
    )?;
    if history_w != w_ytd {
        violation(8, format!("warehouse {w}: W_YTD {w_ytd} != history {history_w}"));
    }
    let mut sum_d_ytd = 0;
    for d in 1..=DISTRICTS {
        let key = district_key(w, d);
        let (Some(d_ytd), Some(next_o_id)) = (
            value(store, Table::DistrictYtd, &key)?,
            value(store, Table::DistrictNextOrderId, &key)?,
        ) else {
            violation(1, format!("district ({w}, {d}) has no D_YTD or D_NEXT_O_ID"));
            continue;
        };
        let d_ytd = decode_money(&d_ytd).map_err(failed)?;
        sum_d_ytd += d_ytd;
        let from_history = history_d.get(&d).copied().unwrap_or(0);
        if d_ytd != from_history {
            violation(9, format!("({w}, {d}): D_YTD {d_ytd} != history {from_history}"));
        }
        let next_o_id = decode_order_id(&next_o_id).map_err(failed)?;
        check_district(store, w, d, next_o_id, payments, &mut violation)?;
    }
    if sum_d_ytd != w_ytd {
        violation(1, format!("warehouse {w}: W_YTD {w_ytd} != sum(D_YTD) {sum_d_ytd}"));
    }
    Ok(())
}

fn check_district<S: TpccStore>(
    store: &S,
    w: u16,
    d: u8,
    next_o_id: u32,
    payments: &Payments,
    violation: &mut impl FnMut(u8, String),
) -> Result<(), TxnError> {
    let prefix = district_key(w, d);
    let at = format!("({w}, {d})");
    let mut orders: BTreeMap<u32, Order> = BTreeMap::new();
    for (k, v) in entries(store, Table::Order, &prefix)? {
        orders.insert(district_row_id(&k), Order::decode(&v).map_err(failed)?);
    }
    let new_orders: BTreeSet<u32> =
        entries(store, Table::NewOrder, &prefix)?.iter().map(|(k, _)| district_row_id(k)).collect();
    // 2 and 3.
    let max_o = orders.keys().next_back().copied().unwrap_or(0);
    if next_o_id - 1 != max_o {
        violation(2, format!("{at}: D_NEXT_O_ID - 1 = {} != max(O_ID) {max_o}", next_o_id - 1));
    }
    if let (Some(&min_no), Some(&max_no)) = (new_orders.first(), new_orders.last()) {
        if max_no != max_o {
            violation(2, format!("{at}: max(NO_O_ID) {max_no} != max(O_ID) {max_o}"));
        }
        if (max_no - min_no + 1) as usize != new_orders.len() {
            violation(
                3,
                format!("{at}: new orders {min_no}..={max_no} but {} rows", new_orders.len()),
            );
        }
    }
    // 5.
    for (o, order) in &orders {
        if (order.carrier_id == 0) != new_orders.contains(o) {
            violation(
                5,
                format!(
                    "{at} order {o}: carrier {} but new order {}",
                    order.carrier_id,
                    new_orders.contains(o)
                ),
            );
        }
    }
    if let Some(o) = new_orders.iter().find(|o| !orders.contains_key(o)) {
        violation(5, format!("{at}: new order {o} has no order"));
    }
    // 4, 6 and 7, and the delivered amounts per customer for 12.
    let mut lines_per_order: BTreeMap<u32, u32> = BTreeMap::new();
    let mut delivered: HashMap<u32, i64> = HashMap::new();
    let mut lines_total = 0u64;
    let mut bad_lines = Vec::new();
    store.for_each(Table::OrderLine, &prefix, &prefix_end(&prefix), &mut |k, v| {
        let o = district_row_id(k);
        let line = OrderLine::decode(v).map_err(|e| e.to_string())?;
        lines_total += 1;
        *lines_per_order.entry(o).or_default() += 1;
        match orders.get(&o) {
            None => bad_lines.push((6, format!("order {o} has lines but no row"))),
            Some(order) if (order.carrier_id == 0) != (line.delivery_d == 0) => bad_lines.push((
                7,
                format!(
                    "order {o}: carrier {} but a line delivered at {}",
                    order.carrier_id, line.delivery_d
                ),
            )),
            Some(order) if order.carrier_id != 0 => {
                *delivered.entry(order.c_id).or_default() += line.amount
            }
            Some(_) => {}
        }
        Ok(())
    })?;
    for (condition, what) in bad_lines {
        violation(condition, format!("{at} {what}"));
    }
    let ol_cnt_sum: u64 = orders.values().map(|o| u64::from(o.ol_cnt)).sum();
    if ol_cnt_sum != lines_total {
        violation(4, format!("{at}: sum(O_OL_CNT) {ol_cnt_sum} != {lines_total} order lines"));
    }
    for (o, order) in &orders {
        let lines = lines_per_order.get(o).copied().unwrap_or(0);
        if u32::from(order.ol_cnt) != lines {
            violation(6, format!("{at} order {o}: O_OL_CNT {} but {lines} lines", order.ol_cnt));
        }
    }
    // 10, 12 and the customer-by-name index.
    let mut names = BTreeSet::new();
    for (k, v) in entries(store, Table::Customer, &prefix)? {
        let c = district_row_id(&k);
        let customer = Customer::decode(&v).map_err(failed)?;
        let paid = delivered.get(&c).copied().unwrap_or(0);
        let history = payments.get(&(w, d, c)).copied().unwrap_or(0);
        if customer.balance != paid - history {
            violation(
                10,
                format!(
                    "{at} customer {c}: C_BALANCE {} != delivered {paid} - payments {history}",
                    customer.balance
                ),
            );
        }
        if customer.balance + customer.ytd_payment != paid {
            violation(
                12,
                format!(
                    "{at} customer {c}: C_BALANCE + C_YTD_PAYMENT = {} != delivered {paid}",
                    customer.balance + customer.ytd_payment
                ),
            );
        }
        names.insert(customer_by_name_key(w, d, &customer.last, &customer.first, c));
    }
    let index: BTreeSet<Vec<u8>> =
        entries(store, Table::CustomerByName, &prefix)?.into_iter().map(|(k, _)| k).collect();
    if index != names {
        violation(0, format!("{at}: the customer-by-name index does not match the customers"));
    }
    // The order-by-customer index.
    let by_customer: BTreeSet<Vec<u8>> =
        orders.iter().map(|(o, order)| order_by_customer_key(w, d, order.c_id, *o)).collect();
    let index: BTreeSet<Vec<u8>> =
        entries(store, Table::OrderByCustomer, &prefix)?.into_iter().map(|(k, _)| k).collect();
    if index != by_customer {
        violation(0, format!("{at}: the order-by-customer index does not match the orders"));
    }
    Ok(())
}
