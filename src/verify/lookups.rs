//! Point reads on the source, used only to explain anomalies.

use std::sync::Arc;

use super::judge::{Lookups, SourceLookup};
use crate::read::record::RecordImage;
use crate::read::{RangeReader, ReadError, Side};

/// Point reads on the source partition, opened on first use.
pub struct SourceLookups {
    side: Side,
    topic: String,
    partition: i32,
}

impl SourceLookups {
    pub fn new(side: &Side, topic: &str, partition: i32) -> SourceLookups {
        SourceLookups {
            side: side.clone(),
            topic: topic.to_string(),
            partition,
        }
    }

    fn first_in(
        &self,
        from: i64,
        end: i64,
        committed: bool,
    ) -> Result<Option<RecordImage>, ReadError> {
        let mut reader = RangeReader::open(
            &self.side,
            &self.topic,
            self.partition,
            from,
            end,
            committed,
            Arc::default(),
        )?;
        reader.next_record()
    }
}

impl Lookups for SourceLookups {
    type Error = ReadError;

    fn source_record_at(&mut self, offset: i64) -> Result<SourceLookup, ReadError> {
        let end = offset + 1;
        if let Some(r) = self.first_in(offset, end, true)? {
            return Ok(SourceLookup::Committed(r));
        }
        Ok(match self.first_in(offset, end, false)? {
            Some(r) => SourceLookup::Aborted(r),
            None => SourceLookup::Absent,
        })
    }

    fn scan_all(
        &mut self,
        from: i64,
        to: i64,
        visit: &mut dyn FnMut(&RecordImage),
    ) -> Result<(), ReadError> {
        let reader = RangeReader::open(
            &self.side,
            &self.topic,
            self.partition,
            from,
            to,
            false,
            Arc::default(),
        )?;
        for record in reader {
            visit(&record?);
        }
        Ok(())
    }
}
