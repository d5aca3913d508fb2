//! Wire-level editing of the embedded `FileDescriptorSet` (issue 14 "Memory").
//!
//! The runtime descriptor pool ([`crate::descriptor_pool`]) is built from the set without
//! each file's `source_code_info` (the proto comments). The cut is made on the protobuf
//! wire format, not by decoding into `prost_types`, because `prost_types` drops unknown
//! fields — and the protocol's custom options (`snowpea.rpc.v1.*` extensions) are unknown
//! fields to it.

/// `FileDescriptorSet.file` (`repeated FileDescriptorProto file = 1`).
const SET_FILE: u64 = 1;
/// `FileDescriptorProto.source_code_info` (`optional SourceCodeInfo source_code_info = 9`).
const FILE_SOURCE_CODE_INFO: u64 = 9;
/// Wire type of length-delimited fields.
const LEN: u64 = 2;

/// A malformed encoding: the byte offset where reading stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Malformed(pub usize);

impl std::fmt::Display for Malformed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "malformed protobuf at byte {}", self.0)
    }
}

impl std::error::Error for Malformed {}

/// `set` (an encoded `FileDescriptorSet`) with every file's `source_code_info` removed;
/// every other byte — options and their extensions included — is kept as it was.
pub fn without_source_info(set: &[u8]) -> Result<Vec<u8>, Malformed> {
    let mut out = Vec::with_capacity(set.len());
    for field in Fields::new(set) {
        let field = field?;
        if field.number == SET_FILE && field.wire_type == LEN {
            let mut file = Vec::with_capacity(field.payload.len());
            for inner in Fields::new(field.payload) {
                let inner = inner?;
                if inner.number == FILE_SOURCE_CODE_INFO && inner.wire_type == LEN {
                    continue;
                }
                file.extend_from_slice(inner.whole);
            }
            put_varint(&mut out, (SET_FILE << 3) | LEN);
            put_varint(&mut out, file.len() as u64);
            out.extend_from_slice(&file);
        } else {
            out.extend_from_slice(field.whole);
        }
    }
    Ok(out)
}

/// One field of a message: its number, wire type, the payload of a length-delimited field
/// and the field's whole encoding (key included).
struct Field<'a> {
    number: u64,
    wire_type: u64,
    payload: &'a [u8],
    whole: &'a [u8],
}

/// The top-level fields of an encoded message, in order.
struct Fields<'a> {
    buf: &'a [u8],
    at: usize,
}

impl<'a> Fields<'a> {
    fn new(buf: &'a [u8]) -> Self {
        Fields { buf, at: 0 }
    }

    fn varint(&mut self) -> Result<u64, Malformed> {
        let mut v = 0u64;
        for shift in (0..64).step_by(7) {
            let b = *self.buf.get(self.at).ok_or(Malformed(self.at))?;
            self.at += 1;
            v |= u64::from(b & 0x7f) << shift;
            if b & 0x80 == 0 {
                return Ok(v);
            }
        }
        Err(Malformed(self.at))
    }

    fn skip(&mut self, n: usize) -> Result<(), Malformed> {
        let end = self.at.checked_add(n).ok_or(Malformed(self.at))?;
        if end > self.buf.len() {
            return Err(Malformed(self.at));
        }
        self.at = end;
        Ok(())
    }

    fn field(&mut self) -> Result<Field<'a>, Malformed> {
        let start = self.at;
        let key = self.varint()?;
        let (number, wire_type) = (key >> 3, key & 7);
        let mut payload: &[u8] = &[];
        match wire_type {
            0 => {
                self.varint()?;
            }
            1 => self.skip(8)?,
            LEN => {
                let n = usize::try_from(self.varint()?).map_err(|_| Malformed(self.at))?;
                let from = self.at;
                self.skip(n)?;
                payload = &self.buf[from..self.at];
            }
            5 => self.skip(4)?,
            _ => return Err(Malformed(start)),
        }
        Ok(Field {
            number,
            wire_type,
            payload,
            whole: &self.buf[start..self.at],
        })
    }
}

impl<'a> Iterator for Fields<'a> {
    type Item = Result<Field<'a>, Malformed>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.at >= self.buf.len() {
            return None;
        }
        let r = self.field();
        if r.is_err() {
            // Stop after the first error.
            self.at = self.buf.len();
        }
        Some(r)
    }
}

fn put_varint(out: &mut Vec<u8>, mut v: u64) {
    while v >= 0x80 {
        out.push((v as u8) | 0x80);
        v >>= 7;
    }
    out.push(v as u8);
}

#[cfg(test)]
mod tests {
    use super::*;
    use prost_reflect::DescriptorPool;

    #[test]
    fn stripping_keeps_every_declaration_and_option_and_drops_only_the_comments() {
        let full = DescriptorPool::decode(crate::FILE_DESCRIPTOR_SET).unwrap();
        let stripped = without_source_info(crate::FILE_DESCRIPTOR_SET).unwrap();
        assert!(stripped.len() < crate::FILE_DESCRIPTOR_SET.len());
        let lean = DescriptorPool::decode(stripped.as_slice()).unwrap();
        assert_eq!(full.files().len(), lean.files().len());
        for (a, b) in full.files().zip(lean.files()) {
            assert_eq!(a.name(), b.name());
            let mut with = a.file_descriptor_proto().clone();
            assert!(
                b.file_descriptor_proto().source_code_info.is_none(),
                "{}",
                b.name()
            );
            with.source_code_info = None;
            assert_eq!(&with, b.file_descriptor_proto(), "{}", a.name());
        }
        // The custom options survive (they are unknown fields to prost_types).
        let m = lean
            .get_service_by_name("snowpea.session.v1.SessionService")
            .unwrap()
            .methods()
            .next()
            .unwrap();
        let ext = lean
            .get_extension_by_name(crate::schema::opt::JSON_METHOD)
            .unwrap();
        assert!(m.options().has_extension(&ext));
    }

    /// Memory guard (issue 14): the pool every process holds carries no comments; only
    /// the documentation side loads them.
    #[test]
    fn the_runtime_pool_holds_no_source_comments() {
        assert!(crate::descriptor_pool()
            .files()
            .all(|f| f.file_descriptor_proto().source_code_info.is_none()));
        let s = crate::schema::schema();
        assert!(!s.methods["session.create"].description().is_empty());
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        for bad in [
            &[0x0a, 0x05, 0x01][..],
            &[0x0a][..],
            &[0xff; 11][..],
            &[0x0b][..],
        ] {
            assert!(without_source_info(bad).is_err(), "{bad:?}");
        }
        assert_eq!(without_source_info(&[]).unwrap(), Vec::<u8>::new());
    }
}
