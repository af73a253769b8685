//! TPC-C's tables as trees: their keys (order-preserving composite keys) and rows (a compact
//! binary encoding), and the scale of a data set.
//!
//! **Keys** are the primary key's columns, each big-endian and fixed-width, concatenated, so
//! that byte order is the order of the tuples: a warehouse id is 2 bytes, a district id and an
//! order-line number 1, customer, order and item ids 4. Names in the customer-by-last-name
//! index are their ASCII bytes ended by a 0 byte (names hold letters only), so that "AB" sorts
//! before "ABC" as in the tuple order and every key of one last name shares a prefix.
//!
//! | table              | key                                           | bytes   |
//! |--------------------|-----------------------------------------------|---------|
//! | warehouse          | w                                             | 2       |
//! | warehouse_ytd      | w                                             | 2       |
//! | district           | w, d                                          | 3       |
//! | district_ytd       | w, d                                          | 3       |
//! | district_next_o_id | w, d                                          | 3       |
//! | customer           | w, d, c                                       | 7       |
//! | customer_by_name   | w, d, c_last 0, c_first 0, c                  | 9 + names |
//! | history            | w, run, terminal, sequence                    | 18      |
//! | new_order          | w, d, o                                       | 7       |
//! | order              | w, d, o                                       | 7       |
//! | order_by_customer  | w, d, c, o                                    | 11      |
//! | order_line         | w, d, o, number                               | 8       |
//! | item               | i                                             | 4       |
//! | stock              | w, i                                          | 6       |
//!
//! History has no primary key in the specification; its key is the warehouse of the payment,
//! the run that wrote it (0: the load; every run takes the next number, kept in `meta`), the
//! terminal and the terminal's own sequence, which is unique and deterministic. The two
//! indexes and new_order hold empty values: their keys say everything.
//!
//! **Hot columns apart.** W_YTD, D_YTD and D_NEXT_O_ID live in trees of their own
//! (`warehouse_ytd`, `district_ytd`, `district_next_o_id`: an `i64` of cents, an `i64`, a
//! `u32`), not in their rows. Every Payment changes the year-to-date figures and every
//! New-Order the next order id, while both read the rest of those rows (names, taxes);
//! an optimistic transaction validates what it read by value, so with the hot columns in
//! the rows every Payment would make the New-Orders of its warehouse then running
//! conflict, and the other way round. Apart, a transaction conflicts only over the values
//! it really shares. The logical tables are the specification's (clause 1.4 leaves the
//! physical layout free).
//!
//! **Rows** hold the columns that are not in the key, in the specification's order, each
//! fixed-width little-endian, strings as a length byte and ASCII bytes: money in cents
//! (`i64`), rates (tax, discount) in ten-thousandths (`i32`), dates in seconds since the
//! Unix epoch (`u64`, 0: null). No floats anywhere. A row that does not decode (short,
//! too long) is an error naming the table.

use std::fmt;

/// The trees of a TPC-C data set.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Table {
    Warehouse,
    WarehouseYtd,
    District,
    DistrictYtd,
    DistrictNextOrderId,
    Customer,
    CustomerByName,
    History,
    NewOrder,
    Order,
    OrderByCustomer,
    OrderLine,
    Item,
    Stock,
    /// The data set's record: its scale, the load's NURand constants, the runs so far.
    Meta,
}

impl Table {
    pub const ALL: [Table; 15] = [
        Table::Warehouse,
        Table::WarehouseYtd,
        Table::District,
        Table::DistrictYtd,
        Table::DistrictNextOrderId,
        Table::Customer,
        Table::CustomerByName,
        Table::History,
        Table::NewOrder,
        Table::Order,
        Table::OrderByCustomer,
        Table::OrderLine,
        Table::Item,
        Table::Stock,
        Table::Meta,
    ];

    /// The tree's name.
    pub fn name(self) -> &'static str {
        match self {
            Table::Warehouse => "tpcc.warehouse",
            Table::WarehouseYtd => "tpcc.warehouse_ytd",
            Table::District => "tpcc.district",
            Table::DistrictYtd => "tpcc.district_ytd",
            Table::DistrictNextOrderId => "tpcc.district_next_o_id",
            Table::Customer => "tpcc.customer",
            Table::CustomerByName => "tpcc.customer_by_name",
            Table::History => "tpcc.history",
            Table::NewOrder => "tpcc.new_order",
            Table::Order => "tpcc.order",
            Table::OrderByCustomer => "tpcc.order_by_customer",
            Table::OrderLine => "tpcc.order_line",
            Table::Item => "tpcc.item",
            Table::Stock => "tpcc.stock",
            Table::Meta => "tpcc.meta",
        }
    }

    /// Its index in `ALL`.
    pub fn index(self) -> usize {
        self as usize
    }
}

impl fmt::Display for Table {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// Districts per warehouse: fixed by the specification (condition 1 of the consistency
/// checks depends on it: 10 x 30,000.00 = 300,000.00).
pub const DISTRICTS: u8 = 10;

/// How large a data set is. `Scale::spec(w)` is TPC-C's; anything smaller is for tests and
/// is not TPC-C (the output says so).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scale {
    pub warehouses: u16,
    /// Items, and stock rows per warehouse (100,000).
    pub items: u32,
    /// Customers per district, and orders per district at load (3,000 each: an order's
    /// customer is a permutation of the customers).
    pub customers: u32,
    /// Orders per district at load that are not delivered: the last ones (900).
    pub new_orders: u32,
}

impl Scale {
    /// TPC-C's cardinalities for `warehouses` warehouses.
    pub fn spec(warehouses: u16) -> Scale {
        Scale { warehouses, items: 100_000, customers: 3000, new_orders: 900 }
    }

    /// A small data set for tests: 1,000 items, 30 customers and orders per district, 9 of
    /// them new. Not TPC-C.
    pub fn reduced(warehouses: u16) -> Scale {
        Scale { warehouses, items: 1000, customers: 30, new_orders: 9 }
    }

    /// Whether this is the specification's scale.
    pub fn is_spec(&self) -> bool {
        *self == Scale::spec(self.warehouses)
    }

    /// The largest last-name number runs draw (999 at TPC-C's scale: the first 1,000
    /// customers of a district carry names 0..=999, so every drawn name exists).
    pub fn last_name_max(&self) -> u32 {
        self.customers.min(1000) - 1
    }

    /// Districts in the data set (the load's progress counts them).
    pub fn districts(&self) -> u64 {
        u64::from(self.warehouses) * u64::from(DISTRICTS)
    }

    pub fn check(&self) -> Result<(), String> {
        if self.warehouses == 0 || self.items == 0 || self.customers == 0 {
            return Err("a data set needs at least one warehouse, item and customer".into());
        }
        if self.new_orders > self.customers {
            return Err("more new orders than orders per district".into());
        }
        Ok(())
    }
}

// ---------------------------------------------------------------------------------------
// Keys

pub fn warehouse_key(w: u16) -> Vec<u8> {
    w.to_be_bytes().to_vec()
}

pub fn district_key(w: u16, d: u8) -> Vec<u8> {
    let mut k = warehouse_key(w);
    k.push(d);
    k
}

/// The key of a row of a district's (customer, order, new_order): w, d, id.
pub fn district_row_key(w: u16, d: u8, id: u32) -> Vec<u8> {
    let mut k = district_key(w, d);
    k.extend_from_slice(&id.to_be_bytes());
    k
}

pub fn customer_key(w: u16, d: u8, c: u32) -> Vec<u8> {
    district_row_key(w, d, c)
}

pub fn order_key(w: u16, d: u8, o: u32) -> Vec<u8> {
    district_row_key(w, d, o)
}

pub fn new_order_key(w: u16, d: u8, o: u32) -> Vec<u8> {
    district_row_key(w, d, o)
}

pub fn order_line_key(w: u16, d: u8, o: u32, number: u8) -> Vec<u8> {
    let mut k = order_key(w, d, o);
    k.push(number);
    k
}

pub fn order_by_customer_key(w: u16, d: u8, c: u32, o: u32) -> Vec<u8> {
    let mut k = customer_key(w, d, c);
    k.extend_from_slice(&o.to_be_bytes());
    k
}

/// The prefix of every customer-by-name key of one last name in a district.
pub fn customer_name_prefix(w: u16, d: u8, last: &[u8]) -> Vec<u8> {
    debug_assert!(!last.contains(&0), "names hold no 0 byte");
    let mut k = district_key(w, d);
    k.extend_from_slice(last);
    k.push(0);
    k
}

pub fn customer_by_name_key(w: u16, d: u8, last: &[u8], first: &[u8], c: u32) -> Vec<u8> {
    debug_assert!(!first.contains(&0), "names hold no 0 byte");
    let mut k = customer_name_prefix(w, d, last);
    k.extend_from_slice(first);
    k.push(0);
    k.extend_from_slice(&c.to_be_bytes());
    k
}

pub fn history_key(w: u16, run: u32, terminal: u32, sequence: u64) -> Vec<u8> {
    let mut k = warehouse_key(w);
    k.extend_from_slice(&run.to_be_bytes());
    k.extend_from_slice(&terminal.to_be_bytes());
    k.extend_from_slice(&sequence.to_be_bytes());
    k
}

pub fn item_key(i: u32) -> Vec<u8> {
    i.to_be_bytes().to_vec()
}

pub fn stock_key(w: u16, i: u32) -> Vec<u8> {
    let mut k = warehouse_key(w);
    k.extend_from_slice(&i.to_be_bytes());
    k
}

/// The first key after every key that starts with `prefix` (the exclusive upper bound of
/// a prefix scan; prefixes here never end in 0xFF bytes only, their first bytes are ids).
pub fn prefix_end(prefix: &[u8]) -> Vec<u8> {
    let mut end = prefix.to_vec();
    while let Some(last) = end.pop() {
        if last < 0xFF {
            end.push(last + 1);
            return end;
        }
    }
    panic!("prefix {prefix:?} has no end");
}

/// The big-endian integer at `at..at + N` of a key.
pub fn key_u32(key: &[u8], at: usize) -> u32 {
    u32::from_be_bytes(key[at..at + 4].try_into().expect("4 bytes"))
}

/// The id (customer, order) of a district row's key, and the order id at the end of an
/// order-by-customer key.
pub fn district_row_id(key: &[u8]) -> u32 {
    key_u32(key, 3)
}

/// The customer id at the end of a customer-by-name key.
pub fn customer_by_name_id(key: &[u8]) -> u32 {
    key_u32(key, key.len() - 4)
}

// ---------------------------------------------------------------------------------------
// Rows

/// A row that does not decode.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRow(pub &'static str);

impl fmt::Display for BadRow {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "a row of {} does not decode", self.0)
    }
}

/// Writes a row's columns.
#[derive(Debug)]
struct Out(Vec<u8>);

impl Default for Out {
    /// Room for the largest row (a customer: its C_DATA alone is up to 500 bytes) from the
    /// start: growing the buffer a column at a time was about 2 % of the CPU of a TPC-C run
    /// in memory (perf).
    fn default() -> Self {
        Out(Vec::with_capacity(704))
    }
}

impl Out {
    fn u8(&mut self, v: u8) -> &mut Self {
        self.0.push(v);
        self
    }
    fn u16(&mut self, v: u16) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u32(&mut self, v: u32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn i32(&mut self, v: i32) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn i64(&mut self, v: i64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn u64(&mut self, v: u64) -> &mut Self {
        self.0.extend_from_slice(&v.to_le_bytes());
        self
    }
    fn str(&mut self, s: &[u8]) -> &mut Self {
        let len = u8::try_from(s.len()).expect("strings of a row are at most 255 bytes");
        self.0.push(len);
        self.0.extend_from_slice(s);
        self
    }
    /// A string up to 65,535 bytes (C_DATA: 500).
    fn long_str(&mut self, s: &[u8]) -> &mut Self {
        self.u16(u16::try_from(s.len()).expect("at most 65,535 bytes"));
        self.0.extend_from_slice(s);
        self
    }
}

/// Reads a row's columns; any shortfall is a `BadRow`.
struct In<'a> {
    bytes: &'a [u8],
    table: &'static str,
}

impl<'a> In<'a> {
    fn take(&mut self, n: usize) -> Result<&'a [u8], BadRow> {
        if self.bytes.len() < n {
            return Err(BadRow(self.table));
        }
        let (head, rest) = self.bytes.split_at(n);
        self.bytes = rest;
        Ok(head)
    }
    fn u8(&mut self) -> Result<u8, BadRow> {
        Ok(self.take(1)?[0])
    }
    fn u16(&mut self) -> Result<u16, BadRow> {
        Ok(u16::from_le_bytes(self.take(2)?.try_into().expect("2")))
    }
    fn u32(&mut self) -> Result<u32, BadRow> {
        Ok(u32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn i32(&mut self) -> Result<i32, BadRow> {
        Ok(i32::from_le_bytes(self.take(4)?.try_into().expect("4")))
    }
    fn i64(&mut self) -> Result<i64, BadRow> {
        Ok(i64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn u64(&mut self) -> Result<u64, BadRow> {
        Ok(u64::from_le_bytes(self.take(8)?.try_into().expect("8")))
    }
    fn str(&mut self) -> Result<Vec<u8>, BadRow> {
        let len = self.u8()? as usize;
        Ok(self.take(len)?.to_vec())
    }
    fn long_str(&mut self) -> Result<Vec<u8>, BadRow> {
        let len = self.u16()? as usize;
        Ok(self.take(len)?.to_vec())
    }
    fn end<T>(self, row: T) -> Result<T, BadRow> {
        match self.bytes.is_empty() {
            true => Ok(row),
            false => Err(BadRow(self.table)),
        }
    }
}

/// A street address: street 1 and 2, city, state, zip.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Address {
    pub street_1: Vec<u8>,
    pub street_2: Vec<u8>,
    pub city: Vec<u8>,
    pub state: Vec<u8>,
    pub zip: Vec<u8>,
}

impl Address {
    fn write(&self, out: &mut Out) {
        out.str(&self.street_1).str(&self.street_2).str(&self.city).str(&self.state).str(&self.zip);
    }
    fn read(input: &mut In<'_>) -> Result<Address, BadRow> {
        Ok(Address {
            street_1: input.str()?,
            street_2: input.str()?,
            city: input.str()?,
            state: input.str()?,
            zip: input.str()?,
        })
    }
}

/// An amount of money (cents), as `warehouse_ytd` and `district_ytd` hold it.
pub fn encode_money(cents: i64) -> Vec<u8> {
    cents.to_le_bytes().to_vec()
}

pub fn decode_money(bytes: &[u8]) -> Result<i64, BadRow> {
    Ok(i64::from_le_bytes(bytes.try_into().map_err(|_| BadRow("a year-to-date"))?))
}

/// An order id, as `district_next_o_id` holds it.
pub fn encode_order_id(o_id: u32) -> Vec<u8> {
    o_id.to_le_bytes().to_vec()
}

pub fn decode_order_id(bytes: &[u8]) -> Result<u32, BadRow> {
    Ok(u32::from_le_bytes(bytes.try_into().map_err(|_| BadRow("district_next_o_id"))?))
}

/// WAREHOUSE: name, address, tax (1/10,000); its year-to-date is in `warehouse_ytd`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Warehouse {
    pub name: Vec<u8>,
    pub address: Address,
    pub tax: i32,
}

impl Warehouse {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::default();
        out.str(&self.name);
        self.address.write(&mut out);
        out.i32(self.tax);
        out.0
    }
    pub fn decode(bytes: &[u8]) -> Result<Warehouse, BadRow> {
        let mut i = In { bytes, table: "warehouse" };
        let row = Warehouse { name: i.str()?, address: Address::read(&mut i)?, tax: i.i32()? };
        i.end(row)
    }
}

/// DISTRICT: name, address, tax; its year-to-date and next order id are in `district_ytd`
/// and `district_next_o_id`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct District {
    pub name: Vec<u8>,
    pub address: Address,
    pub tax: i32,
}

impl District {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::default();
        out.str(&self.name);
        self.address.write(&mut out);
        out.i32(self.tax);
        out.0
    }
    pub fn decode(bytes: &[u8]) -> Result<District, BadRow> {
        let mut i = In { bytes, table: "district" };
        let row = District { name: i.str()?, address: Address::read(&mut i)?, tax: i.i32()? };
        i.end(row)
    }
}

/// CUSTOMER (the columns in the specification's order; credit "GC" or "BC").
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Customer {
    pub first: Vec<u8>,
    pub middle: Vec<u8>,
    pub last: Vec<u8>,
    pub address: Address,
    pub phone: Vec<u8>,
    pub since: u64,
    pub credit: Vec<u8>,
    pub credit_lim: i64,
    pub discount: i32,
    pub balance: i64,
    pub ytd_payment: i64,
    pub payment_cnt: u32,
    pub delivery_cnt: u32,
    pub data: Vec<u8>,
}

impl Customer {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::default();
        out.str(&self.first).str(&self.middle).str(&self.last);
        self.address.write(&mut out);
        out.str(&self.phone).u64(self.since).str(&self.credit).i64(self.credit_lim);
        out.i32(self.discount).i64(self.balance).i64(self.ytd_payment);
        out.u32(self.payment_cnt).u32(self.delivery_cnt).long_str(&self.data);
        out.0
    }
    pub fn decode(bytes: &[u8]) -> Result<Customer, BadRow> {
        let mut i = In { bytes, table: "customer" };
        let row = Customer {
            first: i.str()?,
            middle: i.str()?,
            last: i.str()?,
            address: Address::read(&mut i)?,
            phone: i.str()?,
            since: i.u64()?,
            credit: i.str()?,
            credit_lim: i.i64()?,
            discount: i.i32()?,
            balance: i.i64()?,
            ytd_payment: i.i64()?,
            payment_cnt: i.u32()?,
            delivery_cnt: i.u32()?,
            data: i.long_str()?,
        };
        i.end(row)
    }
}

/// HISTORY (its warehouse is in the key).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct History {
    pub c_id: u32,
    pub c_d_id: u8,
    pub c_w_id: u16,
    pub d_id: u8,
    pub date: u64,
    pub amount: i64,
    pub data: Vec<u8>,
}

impl History {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::default();
        out.u32(self.c_id).u8(self.c_d_id).u16(self.c_w_id).u8(self.d_id);
        out.u64(self.date).i64(self.amount).str(&self.data);
        out.0
    }
    pub fn decode(bytes: &[u8]) -> Result<History, BadRow> {
        let mut i = In { bytes, table: "history" };
        let row = History {
            c_id: i.u32()?,
            c_d_id: i.u8()?,
            c_w_id: i.u16()?,
            d_id: i.u8()?,
            date: i.u64()?,
            amount: i.i64()?,
            data: i.str()?,
        };
        i.end(row)
    }
}

/// ORDER: customer, entry date, carrier (0: null, not delivered), lines, all local.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Order {
    pub c_id: u32,
    pub entry_d: u64,
    pub carrier_id: u8,
    pub ol_cnt: u8,
    pub all_local: bool,
}

impl Order {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::default();
        out.u32(self.c_id).u64(self.entry_d).u8(self.carrier_id).u8(self.ol_cnt);
        out.u8(u8::from(self.all_local));
        out.0
    }
    pub fn decode(bytes: &[u8]) -> Result<Order, BadRow> {
        let mut i = In { bytes, table: "order" };
        let row = Order {
            c_id: i.u32()?,
            entry_d: i.u64()?,
            carrier_id: i.u8()?,
            ol_cnt: i.u8()?,
            all_local: i.u8()? != 0,
        };
        i.end(row)
    }
}

/// ORDER-LINE: item, supplying warehouse, delivery date (0: null), quantity, amount,
/// district information.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OrderLine {
    pub i_id: u32,
    pub supply_w_id: u16,
    pub delivery_d: u64,
    pub quantity: u8,
    pub amount: i64,
    pub dist_info: Vec<u8>,
}

impl OrderLine {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::default();
        out.u32(self.i_id).u16(self.supply_w_id).u64(self.delivery_d).u8(self.quantity);
        out.i64(self.amount).str(&self.dist_info);
        out.0
    }
    pub fn decode(bytes: &[u8]) -> Result<OrderLine, BadRow> {
        let mut i = In { bytes, table: "order_line" };
        let row = OrderLine {
            i_id: i.u32()?,
            supply_w_id: i.u16()?,
            delivery_d: i.u64()?,
            quantity: i.u8()?,
            amount: i.i64()?,
            dist_info: i.str()?,
        };
        i.end(row)
    }
}

/// ITEM: image id, name, price (cents), data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Item {
    pub im_id: u32,
    pub name: Vec<u8>,
    pub price: i64,
    pub data: Vec<u8>,
}

impl Item {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::default();
        out.u32(self.im_id).str(&self.name).i64(self.price).str(&self.data);
        out.0
    }
    pub fn decode(bytes: &[u8]) -> Result<Item, BadRow> {
        let mut i = In { bytes, table: "item" };
        let row = Item { im_id: i.u32()?, name: i.str()?, price: i.i64()?, data: i.str()? };
        i.end(row)
    }
}

/// STOCK: quantity, the ten districts' information, year-to-date, order and remote counts,
/// data.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Stock {
    pub quantity: i32,
    pub dist: [Vec<u8>; DISTRICTS as usize],
    pub ytd: u32,
    pub order_cnt: u32,
    pub remote_cnt: u32,
    pub data: Vec<u8>,
}

impl Stock {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::default();
        out.i32(self.quantity);
        for dist in &self.dist {
            out.str(dist);
        }
        out.u32(self.ytd).u32(self.order_cnt).u32(self.remote_cnt).str(&self.data);
        out.0
    }
    pub fn decode(bytes: &[u8]) -> Result<Stock, BadRow> {
        let mut i = In { bytes, table: "stock" };
        let quantity = i.i32()?;
        let mut dist: [Vec<u8>; DISTRICTS as usize] = Default::default();
        for d in &mut dist {
            *d = i.str()?;
        }
        let row = Stock {
            quantity,
            dist,
            ytd: i.u32()?,
            order_cnt: i.u32()?,
            remote_cnt: i.u32()?,
            data: i.str()?,
        };
        i.end(row)
    }
}

/// A stock row read in place, without a copy of its columns: checked as
/// [`Stock::decode`] checks it, with the counters a New-Order changes at a known place.
/// New-Order and Stock-Level read stock rows by the dozen and need one string of each at
/// most; decoding them whole took eleven allocations a row.
#[derive(Debug, Clone, Copy)]
pub struct StockFields<'a> {
    bytes: &'a [u8],
    /// Where S_DIST_01..10 lie: (offset, length) each.
    dist: [(u16, u8); DISTRICTS as usize],
    /// Where S_YTD, S_ORDER_CNT and S_REMOTE_CNT begin (12 bytes).
    counts_at: usize,
}

impl<'a> StockFields<'a> {
    pub fn parse(bytes: &'a [u8]) -> Result<StockFields<'a>, BadRow> {
        let mut i = In { bytes, table: "stock" };
        i.take(4)?;
        let mut dist = [(0u16, 0u8); DISTRICTS as usize];
        for d in &mut dist {
            let len = i.u8()?;
            let at = bytes.len() - i.bytes.len();
            i.take(usize::from(len))?;
            *d = (at as u16, len);
        }
        let counts_at = bytes.len() - i.bytes.len();
        i.take(12)?;
        let len = i.u8()?;
        i.take(usize::from(len))?;
        i.end(StockFields { bytes, dist, counts_at })
    }

    pub fn quantity(&self) -> i32 {
        i32::from_le_bytes(self.bytes[..4].try_into().expect("checked by parse"))
    }

    /// S_DIST_xx of district `d` (1..=10).
    pub fn dist(&self, d: u8) -> &'a [u8] {
        let (at, len) = self.dist[usize::from(d) - 1];
        &self.bytes[usize::from(at)..usize::from(at) + usize::from(len)]
    }

    fn count(&self, n: usize) -> u32 {
        let at = self.counts_at + 4 * n;
        u32::from_le_bytes(self.bytes[at..at + 4].try_into().expect("checked by parse"))
    }

    /// (S_YTD, S_ORDER_CNT, S_REMOTE_CNT).
    pub fn counts(&self) -> (u32, u32, u32) {
        (self.count(0), self.count(1), self.count(2))
    }

    /// The row with these quantity and counters, the rest as it is.
    pub fn with_counts(
        &self,
        quantity: i32,
        (ytd, order_cnt, remote_cnt): (u32, u32, u32),
    ) -> Vec<u8> {
        let mut row = self.bytes.to_vec();
        row[..4].copy_from_slice(&quantity.to_le_bytes());
        for (n, v) in [ytd, order_cnt, remote_cnt].into_iter().enumerate() {
            let at = self.counts_at + 4 * n;
            row[at..at + 4].copy_from_slice(&v.to_le_bytes());
        }
        row
    }
}

/// The `meta` tree's record of a loaded data set (key `b"dataset"`): its scale and the
/// NURand constants of its load, which runs must know (clause 2.1.6).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct DataSet {
    pub scale: Scale,
    pub c_last_load: u32,
    pub c_id_load: u32,
    pub ol_i_id_load: u32,
}

/// Keys of the `meta` tree.
pub const META_DATASET: &[u8] = b"dataset";
/// The number of the last run (u32): each run takes the next, for its history keys.
pub const META_RUNS: &[u8] = b"runs";

impl DataSet {
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Out::default();
        let s = &self.scale;
        out.u16(s.warehouses).u32(s.items).u32(s.customers).u32(s.new_orders);
        out.u32(self.c_last_load).u32(self.c_id_load).u32(self.ol_i_id_load);
        out.0
    }
    pub fn decode(bytes: &[u8]) -> Result<DataSet, BadRow> {
        let mut i = In { bytes, table: "meta" };
        let scale = Scale {
            warehouses: i.u16()?,
            items: i.u32()?,
            customers: i.u32()?,
            new_orders: i.u32()?,
        };
        let row =
            DataSet { scale, c_last_load: i.u32()?, c_id_load: i.u32()?, ol_i_id_load: i.u32()? };
        i.end(row)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::gen::Rng;

    /// Keys of random tuples sort as the tuples do.
    #[test]
    fn keys_sort_as_their_tuples() {
        let mut rng = Rng::new(5);
        let mut tuples: Vec<(u16, u8, u32, u8)> = (0..2000)
            .map(|_| {
                let w = [0, 1, 255, 256, 65535][rng.below(5) as usize];
                let o = [0, 1, 255, 256, 65536, u32::MAX][rng.below(6) as usize];
                (w, rng.below(11) as u8, o, rng.below(16) as u8)
            })
            .collect();
        tuples.sort_unstable();
        let keys: Vec<Vec<u8>> =
            tuples.iter().map(|&(w, d, o, n)| order_line_key(w, d, o, n)).collect();
        assert!(keys.windows(2).all(|k| k[0] <= k[1]));
        let keys: Vec<Vec<u8>> =
            tuples.iter().map(|&(w, d, o, n)| order_by_customer_key(w, d, o, n.into())).collect();
        assert!(keys.windows(2).all(|k| k[0] <= k[1]));
        type Name = (u16, u8, Vec<u8>, Vec<u8>, u32);
        let mut names: Vec<Name> = (0..2000)
            .map(|_| {
                let name = |rng: &mut Rng| {
                    let len = rng.below(4) as usize;
                    (0..len).map(|_| b"ABZ"[rng.below(3) as usize]).collect::<Vec<u8>>()
                };
                (rng.below(3) as u16, rng.below(3) as u8, name(&mut rng), name(&mut rng), 7)
            })
            .collect();
        names.sort();
        let keys: Vec<Vec<u8>> = names
            .iter()
            .map(|(w, d, last, first, c)| customer_by_name_key(*w, *d, last, first, *c))
            .collect();
        assert!(keys.windows(2).all(|k| k[0] <= k[1]), "names sort as (last, first)");
        for (w, d, last, first, c) in &names {
            let key = customer_by_name_key(*w, *d, last, first, *c);
            let prefix = customer_name_prefix(*w, *d, last);
            assert!(key.starts_with(&prefix) && key < prefix_end(&prefix));
            assert_eq!(customer_by_name_id(&key), *c);
        }
        assert!(history_key(1, 0, 9, 2) < history_key(1, 1, 0, 0));
        assert!(stock_key(1, 100_000) < stock_key(2, 1));
        assert_eq!(district_row_id(&order_by_customer_key(3, 4, 5, 6)), 5);
        assert_eq!(prefix_end(&[1, 0xFF]), vec![2]);
    }

    #[test]
    fn rows_round_trip_and_refuse_garbage() {
        let stock = Stock {
            quantity: -3,
            dist: std::array::from_fn(|d| vec![b'a' + d as u8; 24]),
            ytd: 7,
            order_cnt: 8,
            remote_cnt: 9,
            data: b"ORIGINAL".to_vec(),
        };
        assert_eq!(Stock::decode(&stock.encode()), Ok(stock.clone()));
        // Read in place, the same columns; changed in place, the row decode would make.
        let bytes = stock.encode();
        let fields = StockFields::parse(&bytes).unwrap();
        assert_eq!(fields.quantity(), -3);
        assert_eq!(fields.counts(), (7, 8, 9));
        for d in 1..=DISTRICTS {
            assert_eq!(fields.dist(d), &stock.dist[usize::from(d) - 1][..]);
        }
        let changed =
            Stock { quantity: 80, ytd: 17, order_cnt: 9, remote_cnt: 10, ..stock.clone() };
        assert_eq!(fields.with_counts(80, (17, 9, 10)), changed.encode());
        for cut in [0, 3, 10, bytes.len() - 1] {
            assert_eq!(StockFields::parse(&bytes[..cut]).err(), Some(BadRow("stock")), "{cut}");
        }
        let mut longer = bytes.clone();
        longer.push(0);
        assert_eq!(StockFields::parse(&longer).err(), Some(BadRow("stock")));
        let order = Order { c_id: 5, entry_d: 6, carrier_id: 0, ol_cnt: 15, all_local: true };
        assert_eq!(Order::decode(&order.encode()), Ok(order));
        let mut bytes = stock.encode();
        bytes.push(0);
        assert_eq!(Stock::decode(&bytes), Err(BadRow("stock")));
        assert_eq!(Stock::decode(&bytes[..10]), Err(BadRow("stock")));
        let set = DataSet { scale: Scale::spec(3), c_last_load: 1, c_id_load: 2, ol_i_id_load: 3 };
        assert_eq!(DataSet::decode(&set.encode()), Ok(set));
    }
}
