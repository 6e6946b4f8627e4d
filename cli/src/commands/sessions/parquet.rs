//! `pi sessions export --format parquet -o DIR`: one Parquet file per history view
//! (`sessions.parquet`, `entries.parquet`, …), for DuckDB, pandas, Polars, Spark.
//!
//! Each file has the view's columns with the types `docs/history-sql.md` lists, every column
//! optional (NULL where the view has NULL). Written with the `parquet` crate's column writers
//! (no Arrow, no compression codecs: dictionary and RLE encodings only, which keep repeated
//! ids, models and tools small), in row groups of [`ROW_GROUP_ROWS`]. Each file is written
//! to a temporary name (mode 0600), synced and renamed, so a reader never sees half a file.

use std::fs::File;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::{anyhow, Context};
use parquet::basic::{LogicalType, Repetition, Type as Physical};
use parquet::data_type::{BoolType, ByteArray, ByteArrayType, DoubleType, Int64Type};
use parquet::file::properties::WriterProperties;
use parquet::file::writer::SerializedFileWriter;
use parquet::schema::types::Type;
use pi_storage::history::{ColumnType, HistorySql, SqlValue, View, VIEWS};

use super::search::open_index;
use super::store::StoreArgs;

/// Rows buffered per row group: a few MB of column data for the widest view.
const ROW_GROUP_ROWS: usize = 65_536;

/// Writes every view into `dir` (created if missing); returns each file and its row count.
pub fn export(dir: &Path, store: &StoreArgs) -> anyhow::Result<Vec<(PathBuf, u64)>> {
    let store = store.resolve()?;
    // Kept open while exporting, as for `pi sessions query`.
    let index = open_index(&store.spec, &store.options)?;
    let sql = HistorySql::open(index.path()).map_err(|e| anyhow!("{e}"))?;
    std::fs::create_dir_all(dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut written = Vec::new();
    for view in VIEWS {
        let path = dir.join(format!("{}.parquet", view.name));
        let rows = write_view(&sql, view, &path)
            .with_context(|| format!("cannot write {}", path.display()))?;
        written.push((path, rows));
    }
    Ok(written)
}

fn write_view(sql: &HistorySql, view: &View, path: &Path) -> anyhow::Result<u64> {
    let mut tmp_name = path.as_os_str().to_owned();
    tmp_name.push(".tmp");
    let tmp = PathBuf::from(tmp_name);
    let result = (|| {
        // Owner-only, like the index: the views hold first messages, paths and commands.
        let file = std::fs::OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        let mut writer =
            SerializedFileWriter::new(file, schema(view)?, Arc::new(WriterProperties::new()))?;
        let mut buffer = Buffer::new(view);
        let mut rows = 0u64;
        let mut failed: Option<anyhow::Error> = None;
        let mut query = sql
            .prepare(&format!("SELECT * FROM {}", view.name))
            .map_err(|e| anyhow!("{e}"))?;
        query
            .for_each(|row| {
                buffer.push(row);
                rows += 1;
                if buffer.len >= ROW_GROUP_ROWS {
                    if let Err(e) = buffer.flush(&mut writer) {
                        failed.get_or_insert(e);
                        return Err(std::io::Error::other("parquet write failed"));
                    }
                }
                Ok(())
            })
            .map_err(|e| failed.take().unwrap_or_else(|| anyhow!("{e}")))?;
        buffer.flush(&mut writer)?;
        let file = writer.into_inner()?;
        file.sync_all()?;
        std::fs::rename(&tmp, path)?;
        Ok(rows)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

fn schema(view: &View) -> anyhow::Result<Arc<Type>> {
    let fields = view
        .columns
        .iter()
        .map(|c| {
            let (physical, logical) = match c.ty {
                ColumnType::Integer => (Physical::INT64, None),
                ColumnType::Real => (Physical::DOUBLE, None),
                ColumnType::Text => (Physical::BYTE_ARRAY, Some(LogicalType::String)),
                ColumnType::Bool => (Physical::BOOLEAN, None),
            };
            Ok(Arc::new(
                Type::primitive_type_builder(c.name, physical)
                    .with_repetition(Repetition::OPTIONAL)
                    .with_logical_type(logical)
                    .build()?,
            ))
        })
        .collect::<anyhow::Result<Vec<_>>>()?;
    Ok(Arc::new(
        Type::group_type_builder("schema")
            .with_fields(fields)
            .build()?,
    ))
}

/// One row group's values, column by column, with definition levels (0 = NULL, 1 = value).
struct Buffer {
    columns: Vec<Column>,
    len: usize,
}

enum Column {
    Integer(Vec<i64>, Vec<i16>),
    Real(Vec<f64>, Vec<i16>),
    Text(Vec<ByteArray>, Vec<i16>),
    Bool(Vec<bool>, Vec<i16>),
}

impl Buffer {
    fn new(view: &View) -> Buffer {
        let columns = view
            .columns
            .iter()
            .map(|c| match c.ty {
                ColumnType::Integer => Column::Integer(Vec::new(), Vec::new()),
                ColumnType::Real => Column::Real(Vec::new(), Vec::new()),
                ColumnType::Text => Column::Text(Vec::new(), Vec::new()),
                ColumnType::Bool => Column::Bool(Vec::new(), Vec::new()),
            })
            .collect();
        Buffer { columns, len: 0 }
    }

    /// Adds a row. SQLite's types are per value, so a value is converted to its column's type
    /// where that is lossless in meaning (an integer in a real column); anything else is NULL.
    fn push(&mut self, row: &[SqlValue]) {
        for (column, value) in self.columns.iter_mut().zip(row) {
            let def = |present: bool, defs: &mut Vec<i16>| defs.push(i16::from(present));
            match column {
                Column::Integer(values, defs) => {
                    let v = match value {
                        SqlValue::Integer(i) => Some(*i),
                        SqlValue::Real(f) if f.fract() == 0.0 => Some(*f as i64),
                        _ => None,
                    };
                    values.extend(v);
                    def(v.is_some(), defs);
                }
                Column::Real(values, defs) => {
                    let v = match value {
                        SqlValue::Real(f) => Some(*f),
                        SqlValue::Integer(i) => Some(*i as f64),
                        _ => None,
                    };
                    values.extend(v);
                    def(v.is_some(), defs);
                }
                Column::Text(values, defs) => {
                    let v = match value {
                        SqlValue::Text(s) => Some(ByteArray::from(s.as_str())),
                        SqlValue::Integer(i) => Some(ByteArray::from(i.to_string().as_str())),
                        SqlValue::Real(f) => Some(ByteArray::from(f.to_string().as_str())),
                        _ => None,
                    };
                    def(v.is_some(), defs);
                    values.extend(v);
                }
                Column::Bool(values, defs) => {
                    let v = match value {
                        SqlValue::Integer(i) => Some(*i != 0),
                        _ => None,
                    };
                    values.extend(v);
                    def(v.is_some(), defs);
                }
            }
        }
        self.len += 1;
    }

    /// Writes the buffered rows as one row group (nothing when empty) and clears them.
    fn flush(&mut self, writer: &mut SerializedFileWriter<File>) -> anyhow::Result<()> {
        if self.len == 0 {
            return Ok(());
        }
        let mut group = writer.next_row_group()?;
        for column in &mut self.columns {
            let Some(mut out) = group.next_column()? else {
                return Err(anyhow!(
                    "the Parquet schema has fewer columns than the view"
                ));
            };
            match column {
                Column::Integer(v, d) => {
                    out.typed::<Int64Type>().write_batch(v, Some(d), None)?;
                    v.clear();
                    d.clear();
                }
                Column::Real(v, d) => {
                    out.typed::<DoubleType>().write_batch(v, Some(d), None)?;
                    v.clear();
                    d.clear();
                }
                Column::Text(v, d) => {
                    out.typed::<ByteArrayType>().write_batch(v, Some(d), None)?;
                    v.clear();
                    d.clear();
                }
                Column::Bool(v, d) => {
                    out.typed::<BoolType>().write_batch(v, Some(d), None)?;
                    v.clear();
                    d.clear();
                }
            }
            out.close()?;
        }
        group.close()?;
        self.len = 0;
        Ok(())
    }
}
