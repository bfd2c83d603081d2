//! The workload's self-describing records.
//!
//! Every value the workload writes says who wrote it and where it belongs, and
//! carries a checksum over everything Kafka stores for the record (key,
//! value, headers, timestamp), so a checker can classify a copy from the
//! target alone: which run, partition, key and sequence number it is, whether
//! it was written in a transaction the workload aborted on purpose, and
//! whether any byte of it changed on the way.
//!
//! Value layout (little-endian):
//!
//! ```text
//! magic "ECH1" | run u64 | stream u8 | flags u8 | partition u32 | key u32 |
//! kseq u64 | pseq u64 | pad_len u32 | pad bytes | checksum u64
//! ```
//!
//! `kseq` counts per partition and key, `pseq` per partition and stream (one
//! stream = one producer). Records of transactions aborted on purpose carry
//! [`FLAG_ABORTED`] and do not consume `kseq`.

/// First bytes of every workload value.
pub const MAGIC: &[u8; 4] = b"ECH1";

/// Set on records written in a transaction the workload then aborts on
/// purpose: any of them on the target is an aborted read.
pub const FLAG_ABORTED: u8 = 1;

/// Fixed part of a value before the padding.
const FIXED: usize = 4 + 8 + 1 + 1 + 4 + 4 + 8 + 8 + 4;

/// Identity and content description of one workload record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Meta {
    /// Identifies one scenario run; records of other runs are unexpected.
    pub run: u64,
    /// Which producer wrote it.
    pub stream: u8,
    /// [`FLAG_ABORTED`] or 0.
    pub flags: u8,
    /// The source partition it was written to.
    pub partition: u32,
    /// Key id; the record key is [`key_bytes`] of it.
    pub key: u32,
    /// Sequence number per partition and key.
    pub kseq: u64,
    /// Sequence number per partition and stream (write order).
    pub pseq: u64,
}

impl Meta {
    /// Whether the record was written in a transaction aborted on purpose.
    pub fn aborted(&self) -> bool {
        self.flags & FLAG_ABORTED != 0
    }
}

/// The record key of key id `key`: every eighth key id has a null key, so
/// null keys are copied too.
pub fn key_bytes(key: u32) -> Option<Vec<u8>> {
    (key % 8 != 0).then(|| format!("k{key}").into_bytes())
}

/// Headers as Kafka stores them: ordered, duplicates and null values allowed.
pub type HeaderList = Vec<(String, Option<Vec<u8>>)>;

/// A record ready to send.
#[derive(Debug, Clone)]
pub struct Encoded {
    /// Record key.
    pub key: Option<Vec<u8>>,
    /// Record value (never null).
    pub value: Vec<u8>,
    /// Record headers.
    pub headers: HeaderList,
    /// CreateTime in ms.
    pub timestamp: i64,
}

/// FNV-1a, 64 bit: tiny, dependency-free, good enough to notice changed bytes.
#[derive(Clone, Copy)]
struct Fnv(u64);

impl Fnv {
    fn new() -> Fnv {
        Fnv(0xcbf2_9ce4_8422_2325)
    }
    fn bytes(&mut self, data: &[u8]) {
        for &b in data {
            self.0 ^= u64::from(b);
            self.0 = self.0.wrapping_mul(0x0000_0100_0000_01b3);
        }
    }
    /// Length-prefixed, so field boundaries count; `None` differs from empty.
    fn field(&mut self, data: Option<&[u8]>) {
        match data {
            None => self.bytes(&[0]),
            Some(d) => {
                self.bytes(&[1]);
                self.bytes(&(d.len() as u64).to_le_bytes());
                self.bytes(d);
            }
        }
    }
}

/// Checksum over everything stored for a record except the checksum itself.
fn checksum(key: Option<&[u8]>, body: &[u8], headers: &HeaderList, timestamp: Option<i64>) -> u64 {
    let mut h = Fnv::new();
    h.field(key);
    h.field(Some(body));
    h.bytes(&(headers.len() as u64).to_le_bytes());
    for (k, v) in headers {
        h.field(Some(k.as_bytes()));
        h.field(v.as_deref());
    }
    h.field(timestamp.map(|t| t.to_le_bytes()).as_ref().map(|b| &b[..]));
    h.0
}

/// Builds a record: `pad` filler bytes (derived from the identity, so they
/// differ between records) and the given headers.
pub fn encode(meta: &Meta, pad: usize, headers: HeaderList, timestamp: i64) -> Encoded {
    let mut value = Vec::with_capacity(FIXED + pad + 8);
    value.extend_from_slice(MAGIC);
    value.extend_from_slice(&meta.run.to_le_bytes());
    value.push(meta.stream);
    value.push(meta.flags);
    value.extend_from_slice(&meta.partition.to_le_bytes());
    value.extend_from_slice(&meta.key.to_le_bytes());
    value.extend_from_slice(&meta.kseq.to_le_bytes());
    value.extend_from_slice(&meta.pseq.to_le_bytes());
    value.extend_from_slice(&(pad as u32).to_le_bytes());
    let mut x = meta.pseq ^ (u64::from(meta.key) << 40) ^ 0x9e37_79b9_7f4a_7c15;
    for _ in 0..pad {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        value.push(b'a' + (x % 26) as u8);
    }
    let key = key_bytes(meta.key);
    let sum = checksum(key.as_deref(), &value, &headers, Some(timestamp));
    value.extend_from_slice(&sum.to_le_bytes());
    Encoded {
        key,
        value,
        headers,
        timestamp,
    }
}

/// What a record read back turned out to be.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Decoded {
    /// A workload record whose checksum matches.
    Intact(Meta),
    /// A workload record whose bytes changed (checksum mismatch); the
    /// identity, if its fixed part still parses, may itself be damaged.
    Altered(Option<Meta>),
    /// Not a workload record at all.
    Foreign,
}

/// Parses the fixed part of a value.
fn parse(value: &[u8]) -> Option<(Meta, usize)> {
    if value.len() < FIXED + 8 || &value[..4] != MAGIC {
        return None;
    }
    let u32_at = |i: usize| u32::from_le_bytes(value[i..i + 4].try_into().unwrap());
    let u64_at = |i: usize| u64::from_le_bytes(value[i..i + 8].try_into().unwrap());
    let meta = Meta {
        run: u64_at(4),
        stream: value[12],
        flags: value[13],
        partition: u32_at(14),
        key: u32_at(18),
        kseq: u64_at(22),
        pseq: u64_at(30),
    };
    let pad = u32_at(38) as usize;
    Some((meta, pad))
}

/// Classifies a stored record by its content alone.
pub fn decode(
    key: Option<&[u8]>,
    value: Option<&[u8]>,
    headers: &HeaderList,
    timestamp: Option<i64>,
) -> Decoded {
    let Some(value) = value else {
        return Decoded::Foreign;
    };
    let Some((meta, pad)) = parse(value) else {
        return if value.starts_with(MAGIC) {
            Decoded::Altered(None)
        } else {
            Decoded::Foreign
        };
    };
    if value.len() != FIXED + pad + 8 {
        return Decoded::Altered(Some(meta));
    }
    let (body, sum) = value.split_at(value.len() - 8);
    let stored = u64::from_le_bytes(sum.try_into().unwrap());
    if stored != checksum(key, body, headers, timestamp) {
        return Decoded::Altered(Some(meta));
    }
    Decoded::Intact(meta)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn meta() -> Meta {
        Meta {
            run: 7,
            stream: 1,
            flags: 0,
            partition: 3,
            key: 9,
            kseq: 42,
            pseq: 100,
        }
    }

    fn headers() -> HeaderList {
        vec![
            ("a".into(), Some(b"1".to_vec())),
            ("a".into(), None),
            ("b".into(), Some(vec![])),
        ]
    }

    #[test]
    fn round_trip() {
        let e = encode(&meta(), 33, headers(), 1_700_000_000_000);
        assert_eq!(
            decode(
                e.key.as_deref(),
                Some(&e.value),
                &e.headers,
                Some(e.timestamp)
            ),
            Decoded::Intact(meta())
        );
        let nullkey = Meta { key: 8, ..meta() };
        let e = encode(&nullkey, 0, vec![], 5);
        assert_eq!(e.key, None);
        assert_eq!(
            decode(None, Some(&e.value), &e.headers, Some(5)),
            Decoded::Intact(nullkey)
        );
    }

    #[test]
    fn any_change_is_noticed() {
        let e = encode(&meta(), 10, headers(), 1000);
        let altered = |k: Option<&[u8]>, v: &[u8], h: &HeaderList, t: i64| {
            matches!(decode(k, Some(v), h, Some(t)), Decoded::Altered(_))
        };
        let mut v = e.value.clone();
        v[45] ^= 1;
        assert!(altered(e.key.as_deref(), &v, &e.headers, 1000));
        assert!(altered(Some(b"k10"), &e.value, &e.headers, 1000));
        assert!(altered(None, &e.value, &e.headers, 1000));
        assert!(altered(e.key.as_deref(), &e.value, &e.headers, 1001));
        let mut h = e.headers.clone();
        h.swap(0, 1);
        assert!(altered(e.key.as_deref(), &e.value, &h, 1000));
        assert!(altered(
            e.key.as_deref(),
            &e.value[..e.value.len() - 1],
            &e.headers,
            1000
        ));
        assert_eq!(
            decode(None, Some(b"hello"), &vec![], None),
            Decoded::Foreign
        );
        assert_eq!(decode(None, None, &vec![], None), Decoded::Foreign);
    }
}
