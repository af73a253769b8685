//! The five transactions (clauses 2.4 to 2.8) over any `TpccStore`, and what a terminal
//! draws for them.
//!
//! A transaction's input is drawn once (`Terminal::next_input`), then its body runs in a store
//! transaction; a conflict at the commit runs the body again on the same input, as many
//! times as it takes (`execute`), and each conflict is counted. A New-Order whose last item
//! is the unused id (1 %) ends with a rollback: its transaction is dropped uncommitted, so it
//! writes nothing. Stock-Level reads read-committed; the four others are serializable. A row
//! read and then written is read with `get_for_update` (a locking store locks it there).
//!
//! Simplified: the terminal output (the screens, New-Order's total with taxes) is not
//! produced; Delivery runs in the terminal instead of being queued (clause 2.7.2 allows
//! deferred execution; the work and its isolation are the same), one at a time per
//! warehouse, as a queue served by a delivery process per warehouse runs them
//! (`DeliveryTurn`).

use std::collections::BTreeSet;
use std::sync::atomic::{AtomicBool, Ordering};

use super::random::{
    last_name, nurand, other_warehouse, uniform, NuRandC, A_C_ID, A_C_LAST, A_OL_I_ID,
};
use super::run::MAX_WAREHOUSES;
use super::schema::*;
use super::store::{Isolation, TpccStore, TpccTxn, TxnError};
use crate::gen::Rng;

/// The five transaction types, in the order of the mix.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Kind {
    NewOrder,
    Payment,
    OrderStatus,
    Delivery,
    StockLevel,
}

impl Kind {
    pub const ALL: [Kind; 5] =
        [Kind::NewOrder, Kind::Payment, Kind::OrderStatus, Kind::Delivery, Kind::StockLevel];

    /// Percent of the mix (clause 5.2.3: New-Order takes what the others leave).
    pub fn percent(self) -> u32 {
        match self {
            Kind::NewOrder => 45,
            Kind::Payment => 43,
            Kind::OrderStatus | Kind::Delivery | Kind::StockLevel => 4,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            Kind::NewOrder => "new_order",
            Kind::Payment => "payment",
            Kind::OrderStatus => "order_status",
            Kind::Delivery => "delivery",
            Kind::StockLevel => "stock_level",
        }
    }

    pub fn index(self) -> usize {
        self as usize
    }

    /// Keying time and mean think time in seconds (clause 5.2.5.7).
    pub fn spec_times(self) -> (f64, f64) {
        match self {
            Kind::NewOrder => (18.0, 12.0),
            Kind::Payment => (3.0, 12.0),
            Kind::OrderStatus => (2.0, 10.0),
            Kind::Delivery => (2.0, 5.0),
            Kind::StockLevel => (2.0, 5.0),
        }
    }
}

/// How a customer is named: by id, or by last name (the middle of the matches by first
/// name).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CustomerBy {
    Id(u32),
    LastName(Vec<u8>),
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderLineInput {
    pub i_id: u32,
    pub supply_w: u16,
    pub quantity: u8,
}

/// One transaction's input.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Input {
    NewOrder {
        w: u16,
        d: u8,
        c_id: u32,
        lines: Vec<OrderLineInput>,
        entry_d: u64,
    },
    Payment {
        w: u16,
        d: u8,
        c_w: u16,
        c_d: u8,
        customer: CustomerBy,
        amount: i64,
        date: u64,
        history_key: Vec<u8>,
    },
    OrderStatus {
        w: u16,
        d: u8,
        customer: CustomerBy,
    },
    Delivery {
        w: u16,
        carrier: u8,
        date: u64,
    },
    StockLevel {
        w: u16,
        d: u8,
        threshold: i32,
    },
}

impl Input {
    pub fn kind(&self) -> Kind {
        match self {
            Input::NewOrder { .. } => Kind::NewOrder,
            Input::Payment { .. } => Kind::Payment,
            Input::OrderStatus { .. } => Kind::OrderStatus,
            Input::Delivery { .. } => Kind::Delivery,
            Input::StockLevel { .. } => Kind::StockLevel,
        }
    }
}

/// Where dates come from: the wall clock, or a fixed instant (deterministic runs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Clock {
    Wall,
    Fixed(u64),
}

impl Clock {
    /// Seconds since the Unix epoch.
    pub fn now(self) -> u64 {
        match self {
            Clock::Fixed(at) => at,
            Clock::Wall => std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(1, |d| d.as_secs()),
        }
    }
}

/// A terminal: its home warehouse and district, its generator and the run's constants.
#[derive(Debug, Clone)]
pub struct Terminal {
    pub w: u16,
    /// The district of its Stock-Level transactions (clause 2.8.1.1).
    pub d: u8,
    /// Its number in the run (history keys), from 1.
    pub id: u32,
    /// The run's number (history keys).
    pub run: u32,
    history_seq: u64,
    rng: Rng,
    c: NuRandC,
    scale: Scale,
    clock: Clock,
}

impl Terminal {
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        w: u16,
        d: u8,
        id: u32,
        run: u32,
        seed: u64,
        c: NuRandC,
        scale: Scale,
        clock: Clock,
    ) -> Terminal {
        let rng = Rng::stream(seed ^ 0x7C_C0DE, u64::from(id));
        Terminal { w, d, id, run, history_seq: 0, rng, c, scale, clock }
    }

    /// Draws the next transaction of the mix and its input.
    pub fn next_input(&mut self) -> Input {
        let pick = uniform(&mut self.rng, 1, 100);
        let mut bound = 0;
        let kind = Kind::ALL
            .into_iter()
            .find(|k| {
                bound += k.percent();
                pick <= bound
            })
            .expect("the mix adds up to 100");
        self.input(kind)
    }

    /// Draws the input of a transaction of `kind`.
    pub fn input(&mut self, kind: Kind) -> Input {
        match kind {
            Kind::NewOrder => self.new_order(),
            Kind::Payment => self.payment(),
            Kind::OrderStatus => {
                let d = self.district();
                let customer = self.customer();
                Input::OrderStatus { w: self.w, d, customer }
            }
            Kind::Delivery => Input::Delivery {
                w: self.w,
                carrier: uniform(&mut self.rng, 1, 10) as u8,
                date: self.clock.now(),
            },
            Kind::StockLevel => Input::StockLevel {
                w: self.w,
                d: self.d,
                threshold: uniform(&mut self.rng, 10, 20) as i32,
            },
        }
    }

    /// The draw of a random number, for the spec's think times.
    pub fn rng(&mut self) -> &mut Rng {
        &mut self.rng
    }

    fn district(&mut self) -> u8 {
        uniform(&mut self.rng, 1, u32::from(DISTRICTS)) as u8
    }

    fn customer_id(&mut self) -> u32 {
        nurand(&mut self.rng, A_C_ID, self.c.c_id, 1, self.scale.customers)
    }

    /// 60 % by last name, 40 % by id (clauses 2.5.1.2, 2.6.1.2).
    fn customer(&mut self) -> CustomerBy {
        if uniform(&mut self.rng, 1, 100) <= 60 {
            let max = self.scale.last_name_max();
            CustomerBy::LastName(last_name(nurand(&mut self.rng, A_C_LAST, self.c.c_last, 0, max)))
        } else {
            CustomerBy::Id(self.customer_id())
        }
    }

    fn new_order(&mut self) -> Input {
        let d = self.district();
        let c_id = self.customer_id();
        let count = uniform(&mut self.rng, 5, 15);
        let rollback = uniform(&mut self.rng, 1, 100) == 1;
        let warehouses = self.scale.warehouses;
        let lines = (1..=count)
            .map(|n| {
                let i_id = match rollback && n == count {
                    // An unused item id: the transaction rolls back (clause 2.4.1.4).
                    true => self.scale.items + 1,
                    false => nurand(&mut self.rng, A_OL_I_ID, self.c.ol_i_id, 1, self.scale.items),
                };
                let remote = warehouses > 1 && uniform(&mut self.rng, 1, 100) == 1;
                let supply_w = match remote {
                    true => other_warehouse(&mut self.rng, self.w, warehouses),
                    false => self.w,
                };
                OrderLineInput { i_id, supply_w, quantity: uniform(&mut self.rng, 1, 10) as u8 }
            })
            .collect();
        Input::NewOrder { w: self.w, d, c_id, lines, entry_d: self.clock.now() }
    }

    fn payment(&mut self) -> Input {
        let d = self.district();
        let remote = self.scale.warehouses > 1 && uniform(&mut self.rng, 1, 100) <= 15;
        let (c_w, c_d) = match remote {
            true => {
                (other_warehouse(&mut self.rng, self.w, self.scale.warehouses), self.district())
            }
            false => (self.w, d),
        };
        let customer = self.customer();
        self.history_seq += 1;
        Input::Payment {
            w: self.w,
            d,
            c_w,
            c_d,
            customer,
            amount: i64::from(uniform(&mut self.rng, 100, 500_000)),
            date: self.clock.now(),
            history_key: history_key(self.w, self.run, self.id, self.history_seq),
        }
    }
}

/// What a transaction did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Outcome {
    /// A New-Order that rolled back (its unused item).
    pub rolled_back: bool,
    /// Districts a Delivery found without a new order.
    pub skipped: u8,
    /// Conflicts before the commit that succeeded.
    pub conflicts: u32,
    /// Stock-Level: the items below the threshold (what the terminal shows).
    pub low_stock: u32,
}

/// One flag per warehouse: a Delivery of it is running (see [`DeliveryTurn`]).
static DELIVERING: [AtomicBool; MAX_WAREHOUSES as usize + 1] =
    [const { AtomicBool::new(false) }; MAX_WAREHOUSES as usize + 1];

/// A warehouse's turn to deliver, held while its Delivery runs (retries included). The
/// specification queues Deliveries and runs them deferred (clause 2.7.2), typically one
/// delivery process per warehouse; run in the terminals instead, two Deliveries of one
/// warehouse at once both take the same oldest new orders, and all but one fail at the
/// commit, each after ten districts of work (in memory about one conflict per Delivery; out
/// of memory three). Taking turns per warehouse is what such a queue does.
pub(super) struct DeliveryTurn(u16);

impl DeliveryTurn {
    pub(super) async fn take<S: TpccStore>(store: &S, w: u16) -> DeliveryTurn {
        let flag = &DELIVERING[usize::from(w)];
        while flag.compare_exchange(false, true, Ordering::Acquire, Ordering::Relaxed).is_err() {
            store.wait_turn().await;
        }
        DeliveryTurn(w)
    }
}

impl Drop for DeliveryTurn {
    fn drop(&mut self) {
        DELIVERING[usize::from(self.0)].store(false, Ordering::Release);
    }
}

/// Runs `input` on `store` until it commits (or rolls back), counting the conflicts.
pub async fn execute<S: TpccStore>(
    store: &S,
    input: &Input,
    scale: &Scale,
) -> Result<Outcome, TxnError> {
    let _turn = match input {
        Input::Delivery { w, .. } => Some(DeliveryTurn::take(store, *w).await),
        _ => None,
    };
    let mut conflicts = 0;
    loop {
        let isolation = match input {
            Input::StockLevel { .. } => Isolation::ReadCommitted,
            _ => Isolation::Serializable,
        };
        let mut txn = store.begin(isolation);
        let body = match input {
            Input::NewOrder { w, d, c_id, lines, entry_d } => {
                new_order(&mut txn, *w, *d, *c_id, lines, *entry_d).await
            }
            Input::Payment { .. } => payment(&mut txn, input, scale).await,
            Input::OrderStatus { w, d, customer } => {
                order_status(&mut txn, *w, *d, customer, scale).await
            }
            Input::Delivery { w, carrier, date } => delivery(&mut txn, *w, *carrier, *date).await,
            Input::StockLevel { w, d, threshold } => {
                stock_level(&mut txn, *w, *d, *threshold).await
            }
        };
        let result = match body {
            // Dropped uncommitted: nothing written.
            Ok(outcome) if outcome.rolled_back => Ok(outcome),
            Ok(outcome) => txn.commit().await.map(|()| outcome),
            Err(e) => Err(e),
        };
        match result {
            Ok(outcome) => return Ok(Outcome { conflicts, ..outcome }),
            Err(TxnError::Conflict) => {
                conflicts += 1;
                store.back_off(conflicts).await;
            }
            Err(e) => return Err(e),
        }
    }
}

/// The row of `key` in `table`, decoded; a missing row is an error (the data set is
/// broken).
async fn row<T: TpccTxn, R>(
    txn: &mut T,
    table: Table,
    key: &[u8],
    decode: fn(&[u8]) -> Result<R, BadRow>,
) -> Result<R, TxnError> {
    decoded(txn.get(table, key).await?, table, key, decode)
}

/// `row` of a row the transaction then writes (`TpccTxn::get_for_update`).
async fn row_for_update<T: TpccTxn, R>(
    txn: &mut T,
    table: Table,
    key: &[u8],
    decode: fn(&[u8]) -> Result<R, BadRow>,
) -> Result<R, TxnError> {
    decoded(txn.get_for_update(table, key).await?, table, key, decode)
}

pub(super) fn decoded<R>(
    found: Option<Vec<u8>>,
    table: Table,
    key: &[u8],
    decode: fn(&[u8]) -> Result<R, BadRow>,
) -> Result<R, TxnError> {
    match found {
        Some(bytes) => Ok(decode(&bytes)?),
        None => Err(missing(table, key)),
    }
}

/// The failure of a read that must find its row.
fn missing(table: Table, key: &[u8]) -> TxnError {
    TxnError::Failed(format!("{table} has no row with key {key:02x?}"))
}

/// The customer id of `by` in district (w, d): by last name, the middle one (rounded up)
/// of the matches in first-name order (clause 2.5.2.2).
async fn customer_id<T: TpccTxn>(
    txn: &mut T,
    w: u16,
    d: u8,
    by: &CustomerBy,
    scale: &Scale,
) -> Result<u32, TxnError> {
    let last = match by {
        CustomerBy::Id(c) => return Ok(*c),
        CustomerBy::LastName(last) => last,
    };
    let prefix = customer_name_prefix(w, d, last);
    let limit = scale.customers as usize;
    let end = prefix_end(&prefix);
    let matches = txn.scan(Table::CustomerByName, &prefix, &end, limit, false).await?;
    if matches.is_empty() {
        let name = String::from_utf8_lossy(last);
        return Err(TxnError::Failed(format!("no customer named {name} in ({w}, {d})")));
    }
    Ok(customer_by_name_id(&matches[(matches.len() - 1) / 2].0))
}

/// New-Order (clause 2.4.2). The district's next order id, which every New-Order of the
/// district changes, is read and bumped last, just before the commit: the reads and writes
/// of the items and stock come first, so that the window in which another New-Order of the
/// district makes this one conflict is as short as it can be. The outcome is the
/// specification's (the same rows written); only the order of the reads differs.
pub async fn new_order<T: TpccTxn>(
    txn: &mut T,
    w: u16,
    d: u8,
    c_id: u32,
    lines: &[OrderLineInput],
    entry_d: u64,
) -> Result<Outcome, TxnError> {
    // W_TAX, D_TAX and C_DISCOUNT would go into the total shown on the terminal.
    row(txn, Table::Warehouse, &warehouse_key(w), Warehouse::decode).await?;
    let district_key = district_key(w, d);
    row(txn, Table::District, &district_key, District::decode).await?;
    row(txn, Table::Customer, &customer_key(w, d, c_id), Customer::decode).await?;
    // The items, then their stock rows, each read all at once (`TpccTxn::get_many`: out of
    // memory the stock rows are where the misses are).
    let item_keys: Vec<_> = lines.iter().map(|line| item_key(line.i_id)).collect();
    let items = txn.get_many(Table::Item, &item_keys, false).await?;
    if items.iter().any(Option::is_none) {
        return Ok(Outcome { rolled_back: true, ..Outcome::default() });
    }
    let stock_keys: Vec<_> = lines.iter().map(|l| stock_key(l.supply_w, l.i_id)).collect();
    let stocks = txn.get_many(Table::Stock, &stock_keys, true).await?;
    let mut order_lines = Vec::with_capacity(lines.len());
    for (n, ((line, item), found)) in lines.iter().zip(items).zip(stocks).enumerate() {
        let item = decoded(item, Table::Item, &item_keys[n], Item::decode)?;
        let stock_key = &stock_keys[n];
        let row = match stock_keys[..n].contains(stock_key) {
            // An item ordered twice: its stock row as this order left it.
            true => row_for_update(txn, Table::Stock, stock_key, |row| Ok(row.to_vec())).await?,
            false => found.ok_or_else(|| missing(Table::Stock, stock_key))?,
        };
        let stock = StockFields::parse(&row).map_err(TxnError::from)?;
        let quantity = i32::from(line.quantity);
        let left = match stock.quantity() >= quantity + 10 {
            true => stock.quantity() - quantity,
            false => stock.quantity() - quantity + 91,
        };
        let (ytd, order_cnt, remote_cnt) = stock.counts();
        let remote = u32::from(line.supply_w != w);
        let counts = (ytd + u32::from(line.quantity), order_cnt + 1, remote_cnt + remote);
        txn.put(Table::Stock, stock_key, &stock.with_counts(left, counts))?;
        order_lines.push(OrderLine {
            i_id: line.i_id,
            supply_w_id: line.supply_w,
            delivery_d: 0,
            quantity: line.quantity,
            amount: i64::from(line.quantity) * item.price,
            dist_info: stock.dist(d).to_vec(),
        });
    }
    let o_id =
        row_for_update(txn, Table::DistrictNextOrderId, &district_key, decode_order_id).await?;
    txn.put(Table::DistrictNextOrderId, &district_key, &encode_order_id(o_id + 1))?;
    let order = Order {
        c_id,
        entry_d,
        carrier_id: 0,
        ol_cnt: lines.len() as u8,
        all_local: lines.iter().all(|l| l.supply_w == w),
    };
    txn.put(Table::Order, &order_key(w, d, o_id), &order.encode())?;
    txn.put(Table::NewOrder, &new_order_key(w, d, o_id), &[])?;
    txn.put(Table::OrderByCustomer, &order_by_customer_key(w, d, c_id, o_id), &[])?;
    for (number, line) in (1u8..).zip(&order_lines) {
        txn.put(Table::OrderLine, &order_line_key(w, d, o_id, number), &line.encode())?;
    }
    Ok(Outcome::default())
}

/// Payment (clause 2.5.2). The warehouse's and the district's year-to-date, which every
/// Payment of the warehouse changes, are added to (`TpccTxn::add_money`), last: on a store
/// with commutative adds no Payment depends on their values, elsewhere the window in which
/// another Payment makes this one conflict is as short as it can be.
pub async fn payment<T: TpccTxn>(
    txn: &mut T,
    input: &Input,
    scale: &Scale,
) -> Result<Outcome, TxnError> {
    let Input::Payment { w, d, c_w, c_d, customer, amount, date, history_key } = input else {
        panic!("payment of {input:?}");
    };
    let (w, d, c_w, c_d, amount) = (*w, *d, *c_w, *c_d, *amount);
    let c_id = customer_id(txn, c_w, c_d, customer, scale).await?;
    let customer_key = customer_key(c_w, c_d, c_id);
    let mut c = row_for_update(txn, Table::Customer, &customer_key, Customer::decode).await?;
    c.balance -= amount;
    c.ytd_payment += amount;
    c.payment_cnt += 1;
    if c.credit == b"BC" {
        let mut data = format!("{c_id} {c_d} {c_w} {d} {w} {amount} ").into_bytes();
        data.extend_from_slice(&c.data);
        data.truncate(500);
        c.data = data;
    }
    txn.put(Table::Customer, &customer_key, &c.encode())?;
    let (warehouse_key, district_key) = (warehouse_key(w), district_key(w, d));
    let warehouse = row(txn, Table::Warehouse, &warehouse_key, Warehouse::decode).await?;
    let district = row(txn, Table::District, &district_key, District::decode).await?;
    txn.add_money(Table::DistrictYtd, &district_key, amount).await?;
    txn.add_money(Table::WarehouseYtd, &warehouse_key, amount).await?;
    let mut data = warehouse.name;
    data.extend_from_slice(b"    ");
    data.extend_from_slice(&district.name);
    let history = History { c_id, c_d_id: c_d, c_w_id: c_w, d_id: d, date: *date, amount, data };
    txn.put(Table::History, history_key, &history.encode())?;
    Ok(Outcome::default())
}

/// Order-Status (clause 2.6.2): the customer, their last order (the order-by-customer index
/// backwards, one entry) and its lines.
pub async fn order_status<T: TpccTxn>(
    txn: &mut T,
    w: u16,
    d: u8,
    customer: &CustomerBy,
    scale: &Scale,
) -> Result<Outcome, TxnError> {
    let c_id = customer_id(txn, w, d, customer, scale).await?;
    row(txn, Table::Customer, &customer_key(w, d, c_id), Customer::decode).await?;
    let prefix = customer_key(w, d, c_id);
    let last = txn.scan(Table::OrderByCustomer, &prefix, &prefix_end(&prefix), 1, true).await?;
    if let Some((key, _)) = last.first() {
        let o_id = key_u32(key, 7);
        let order_key = order_key(w, d, o_id);
        row(txn, Table::Order, &order_key, Order::decode).await?;
        let end = prefix_end(&order_key);
        for (_, line) in txn.scan(Table::OrderLine, &order_key, &end, 15, false).await? {
            OrderLine::decode(&line)?;
        }
    }
    Ok(Outcome::default())
}

/// Delivery (clause 2.7.4): in each district the oldest new order, delivered; a district
/// without one is skipped.
///
/// In passes over the districts, so that the rows a pass needs are read all at once
/// (`TpccTxn::get_many`) rather than one district after another: the oldest new orders;
/// their orders (which name the customers and count the lines); the order lines, by key
/// (lines 1 to the order's count, which condition 3.3.2.8 says are all there are) and the
/// customers. The transaction reads and writes the same rows as district by district.
pub async fn delivery<T: TpccTxn>(
    txn: &mut T,
    w: u16,
    carrier: u8,
    date: u64,
) -> Result<Outcome, TxnError> {
    let mut skipped = 0;
    let mut found = Vec::with_capacity(usize::from(DISTRICTS));
    for d in 1..=DISTRICTS {
        let district = district_key(w, d);
        let oldest = txn.scan(Table::NewOrder, &district, &prefix_end(&district), 1, false).await?;
        match oldest.into_iter().next() {
            Some((new_order, _)) => found.push((d, district_row_id(&new_order), new_order)),
            None => skipped += 1,
        }
    }
    let order_keys: Vec<_> = found.iter().map(|&(d, o_id, _)| order_key(w, d, o_id)).collect();
    // Orders and order lines are read plainly, not for update: only a Delivery changes them
    // once written, and a warehouse's Deliveries take turns (`DeliveryTurn`).
    let orders = txn.get_many(Table::Order, &order_keys, false).await?;
    let (mut line_keys, mut customer_keys) = (Vec::new(), Vec::with_capacity(found.len()));
    let mut line_counts = Vec::with_capacity(found.len());
    for (((d, o_id, new_order), order_key), order) in found.iter().zip(&order_keys).zip(orders) {
        txn.delete(Table::NewOrder, new_order)?;
        let mut order = decoded(order, Table::Order, order_key, Order::decode)?;
        order.carrier_id = carrier;
        txn.put(Table::Order, order_key, &order.encode())?;
        line_keys.extend((1..=order.ol_cnt).map(|n| order_line_key(w, *d, *o_id, n)));
        line_counts.push(usize::from(order.ol_cnt));
        customer_keys.push(customer_key(w, *d, order.c_id));
    }
    let lines = txn.get_many(Table::OrderLine, &line_keys, false).await?;
    let customers = txn.get_many(Table::Customer, &customer_keys, true).await?;
    let mut lines = line_keys.iter().zip(lines);
    for ((customer_key, customer), count) in customer_keys.iter().zip(customers).zip(line_counts) {
        let mut total = 0;
        for (key, line) in lines.by_ref().take(count) {
            let mut line = decoded(line, Table::OrderLine, key, OrderLine::decode)?;
            line.delivery_d = date;
            total += line.amount;
            txn.put(Table::OrderLine, key, &line.encode())?;
        }
        let mut customer = decoded(customer, Table::Customer, customer_key, Customer::decode)?;
        customer.balance += total;
        customer.delivery_cnt += 1;
        txn.put(Table::Customer, customer_key, &customer.encode())?;
    }
    Ok(Outcome { skipped, ..Outcome::default() })
}

/// Stock-Level (clause 2.8.2): of the items in the district's last 20 orders, how many have
/// less stock than `threshold`.
pub async fn stock_level<T: TpccTxn>(
    txn: &mut T,
    w: u16,
    d: u8,
    threshold: i32,
) -> Result<Outcome, TxnError> {
    let next = row(txn, Table::DistrictNextOrderId, &district_key(w, d), decode_order_id).await?;
    let (from, to) = (order_key(w, d, next.saturating_sub(20)), order_key(w, d, next));
    let lines = txn.scan(Table::OrderLine, &from, &to, 20 * 15, false).await?;
    let mut items = BTreeSet::new();
    for (_, line) in lines {
        items.insert(OrderLine::decode(&line)?.i_id);
    }
    let keys: Vec<_> = items.iter().map(|&i| stock_key(w, i)).collect();
    let mut low = 0;
    for (key, stock) in keys.iter().zip(txn.get_many(Table::Stock, &keys, false).await?) {
        let stock = stock.ok_or_else(|| missing(Table::Stock, key))?;
        low +=
            u32::from(StockFields::parse(&stock).map_err(TxnError::from)?.quantity() < threshold);
    }
    Ok(Outcome { low_stock: low, ..Outcome::default() })
}
