//! The in-memory reference store: one `BTreeMap` per table behind a lock. Its transactions
//! buffer their writes, read them first, and apply them at the commit, which never
//! conflicts: the model is meant for one terminal at a time, where that is exactly
//! serializable. A run on it and a run on Ferrite with the same seed must leave the same
//! rows in every table.

use std::collections::BTreeMap;
use std::future::{ready, Future};
use std::sync::{Arc, Mutex};

use super::schema::Table;
use super::store::{Entries, Isolation, TpccStore, TpccTxn, TxnError, Visit};

type Rows = BTreeMap<Vec<u8>, Vec<u8>>;

/// The model's tables, shared by its transactions.
#[derive(Debug, Clone, Default)]
pub struct Model {
    tables: Arc<Mutex<Vec<Rows>>>,
}

impl Model {
    pub fn new() -> Model {
        Model { tables: Arc::new(Mutex::new(vec![Rows::new(); Table::ALL.len()])) }
    }
}

/// A transaction of the model: its writes by (table, key), `None` for a delete.
#[derive(Debug)]
pub struct ModelTxn {
    tables: Arc<Mutex<Vec<Rows>>>,
    writes: BTreeMap<(Table, Vec<u8>), Option<Vec<u8>>>,
}

impl TpccTxn for ModelTxn {
    fn get(
        &mut self,
        table: Table,
        key: &[u8],
    ) -> impl Future<Output = Result<Option<Vec<u8>>, TxnError>> + Send {
        let value = match self.writes.get(&(table, key.to_vec())) {
            Some(own) => own.clone(),
            None => self.tables.lock().unwrap()[table.index()].get(key).cloned(),
        };
        ready(Ok(value))
    }

    fn scan(
        &mut self,
        table: Table,
        lower: &[u8],
        upper: &[u8],
        limit: usize,
        reverse: bool,
    ) -> impl Future<Output = Result<Entries, TxnError>> + Send {
        let mut merged: BTreeMap<Vec<u8>, Option<Vec<u8>>> = self.tables.lock().unwrap()
            [table.index()]
        .range(lower.to_vec()..upper.to_vec())
        .map(|(k, v)| (k.clone(), Some(v.clone())))
        .collect();
        let own = self.writes.range((table, lower.to_vec())..(table, upper.to_vec()));
        for ((_, key), value) in own {
            merged.insert(key.clone(), value.clone());
        }
        let present = merged.into_iter().filter_map(|(k, v)| Some((k, v?)));
        let entries = match reverse {
            false => present.take(limit).collect(),
            true => present.rev().take(limit).collect(),
        };
        ready(Ok(entries))
    }

    fn put(&mut self, table: Table, key: &[u8], value: &[u8]) -> Result<(), TxnError> {
        self.writes.insert((table, key.to_vec()), Some(value.to_vec()));
        Ok(())
    }

    fn delete(&mut self, table: Table, key: &[u8]) -> Result<(), TxnError> {
        self.writes.insert((table, key.to_vec()), None);
        Ok(())
    }

    fn commit(self) -> impl Future<Output = Result<(), TxnError>> + Send {
        let mut tables = self.tables.lock().unwrap();
        for ((table, key), value) in self.writes {
            match value {
                Some(value) => tables[table.index()].insert(key, value),
                None => tables[table.index()].remove(&key),
            };
        }
        ready(Ok(()))
    }
}

impl TpccStore for Model {
    type Txn = ModelTxn;

    fn name(&self) -> &'static str {
        "model"
    }

    fn isolation(&self) -> String {
        "one transaction at a time (a reference for single-terminal runs)".into()
    }

    fn isolation_name(&self) -> &'static str {
        "serial"
    }

    fn begin(&self, _isolation: Isolation) -> ModelTxn {
        ModelTxn { tables: Arc::clone(&self.tables), writes: BTreeMap::new() }
    }

    fn write_rows(&self, rows: &[(Table, Vec<u8>, Vec<u8>)]) -> Result<(), TxnError> {
        let mut tables = self.tables.lock().unwrap();
        for (table, key, value) in rows {
            tables[table.index()].insert(key.clone(), value.clone());
        }
        Ok(())
    }

    fn for_each(
        &self,
        table: Table,
        lower: &[u8],
        upper: &[u8],
        visit: &mut Visit<'_>,
    ) -> Result<(), TxnError> {
        let tables = self.tables.lock().unwrap();
        for (key, value) in tables[table.index()].range(lower.to_vec()..upper.to_vec()) {
            visit(key, value).map_err(TxnError::Failed)?;
        }
        Ok(())
    }
}
