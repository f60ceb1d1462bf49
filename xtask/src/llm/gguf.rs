//! Reading string metadata from a GGUF model file (llama.cpp's format): a header, then key/value pairs
//! with typed values, then the tensors (never read here).
//!
//! Layout (little-endian): `GGUF`, version `u32` (2 or 3), tensor count `u64`, pair count `u64`; each pair
//! is a key (a string: `u64` length, UTF-8 bytes), a value type `u32` and the value. Strings are
//! length-prefixed, arrays are an element type `u32`, a count `u64` and the elements.

use std::fs::File;
use std::io::{BufReader, Read};
use std::path::Path;

/// The largest string accepted (a chat template is a few KiB; a tokenizer entry a few bytes).
const MAX_STRING: u64 = 16 << 20;

/// The value of a string entry of the metadata, `Ok(None)` when the file has no entry `key`.
pub(crate) fn read_string(path: &Path, key: &str) -> Result<Option<String>, String> {
    let file = File::open(path).map_err(|err| format!("cannot open {}: {err}", path.display()))?;
    let mut reader = Reader { inner: BufReader::with_capacity(1 << 16, file) };
    find_string(&mut reader, key).map_err(|err| format!("{}: {err}", path.display()))
}

/// Value types of the format.
mod kind {
    pub(super) const STRING: u32 = 8;
    pub(super) const ARRAY: u32 = 9;
}

/// The size of a fixed-size value type, `None` for strings, arrays and unknown types.
fn fixed_size(kind: u32) -> Option<u64> {
    match kind {
        0 | 1 | 7 => Some(1), // u8, i8, bool
        2 | 3 => Some(2),     // u16, i16
        4..=6 => Some(4),     // u32, i32, f32
        10..=12 => Some(8),   // u64, i64, f64
        _ => None,
    }
}

struct Reader<R> {
    inner: R,
}

impl<R: Read + std::io::Seek> Reader<R> {
    fn bytes<const N: usize>(&mut self) -> Result<[u8; N], String> {
        let mut buf = [0u8; N];
        self.inner.read_exact(&mut buf).map_err(|err| format!("truncated metadata: {err}"))?;
        Ok(buf)
    }

    fn u32(&mut self) -> Result<u32, String> {
        Ok(u32::from_le_bytes(self.bytes()?))
    }

    fn u64(&mut self) -> Result<u64, String> {
        Ok(u64::from_le_bytes(self.bytes()?))
    }

    fn string(&mut self) -> Result<String, String> {
        let len = self.u64()?;
        if len > MAX_STRING {
            return Err(format!("a metadata string claims {len} bytes, more than the {MAX_STRING} accepted"));
        }
        let mut buf = vec![0u8; len as usize];
        self.inner.read_exact(&mut buf).map_err(|err| format!("truncated metadata: {err}"))?;
        String::from_utf8(buf).map_err(|_| "a metadata string is not UTF-8".to_owned())
    }

    fn skip(&mut self, bytes: u64) -> Result<(), String> {
        let offset = i64::try_from(bytes).map_err(|_| format!("cannot skip {bytes} bytes"))?;
        self.inner.seek_relative(offset).map_err(|err| format!("cannot skip {bytes} bytes: {err}"))
    }

    /// Skips one value of type `kind`.
    fn skip_value(&mut self, kind: u32) -> Result<(), String> {
        if let Some(size) = fixed_size(kind) {
            return self.skip(size);
        }
        match kind {
            kind::STRING => {
                let len = self.u64()?;
                self.skip(len)
            }
            kind::ARRAY => {
                let element = self.u32()?;
                let count = self.u64()?;
                if let Some(size) = fixed_size(element) {
                    let total = size
                        .checked_mul(count)
                        .ok_or_else(|| format!("an array of {count} elements overflows"))?;
                    return self.skip(total);
                }
                if element == kind::ARRAY {
                    return Err("nested metadata arrays are not supported".to_owned());
                }
                for _ in 0..count {
                    self.skip_value(element)?;
                }
                Ok(())
            }
            other => Err(format!("unknown metadata value type {other}")),
        }
    }
}

fn find_string<R: Read + std::io::Seek>(reader: &mut Reader<R>, key: &str) -> Result<Option<String>, String> {
    if &reader.bytes::<4>()? != b"GGUF" {
        return Err("not a GGUF file (no `GGUF` magic)".to_owned());
    }
    let version = reader.u32()?;
    if !(2..=3).contains(&version) {
        return Err(format!("GGUF version {version} is not supported (2 and 3 are)"));
    }
    let _tensors = reader.u64()?;
    let pairs = reader.u64()?;
    for _ in 0..pairs {
        let name = reader.string()?;
        let value_kind = reader.u32()?;
        if name == key {
            if value_kind != kind::STRING {
                return Err(format!("metadata `{key}` has value type {value_kind}, not a string"));
            }
            return reader.string().map(Some);
        }
        reader.skip_value(value_kind)?;
    }
    Ok(None)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    /// A GGUF header with the given pairs (already encoded) and no tensors.
    fn file(pairs: &[Vec<u8>]) -> Vec<u8> {
        let mut out = b"GGUF".to_vec();
        out.extend_from_slice(&3u32.to_le_bytes());
        out.extend_from_slice(&0u64.to_le_bytes());
        out.extend_from_slice(&(pairs.len() as u64).to_le_bytes());
        for pair in pairs {
            out.extend_from_slice(pair);
        }
        out
    }

    fn string(value: &str) -> Vec<u8> {
        let mut out = (value.len() as u64).to_le_bytes().to_vec();
        out.extend_from_slice(value.as_bytes());
        out
    }

    fn pair(key: &str, kind: u32, value: &[u8]) -> Vec<u8> {
        let mut out = string(key);
        out.extend_from_slice(&kind.to_le_bytes());
        out.extend_from_slice(value);
        out
    }

    fn find(bytes: Vec<u8>, key: &str) -> Result<Option<String>, String> {
        find_string(&mut Reader { inner: Cursor::new(bytes) }, key)
    }

    #[test]
    fn finds_a_string_after_values_of_every_kind() {
        let mut tokens = 8u32.to_le_bytes().to_vec(); // element type: string
        tokens.extend_from_slice(&2u64.to_le_bytes());
        tokens.extend(string("<s>"));
        tokens.extend(string("hello"));
        let mut token_types = 5u32.to_le_bytes().to_vec(); // element type: i32
        token_types.extend_from_slice(&3u64.to_le_bytes());
        token_types.extend_from_slice(&[1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0]);
        let bytes = file(&[
            pair("general.architecture", 8, &string("qwen2")),
            pair("qwen2.block_count", 4, &24u32.to_le_bytes()),
            pair("qwen2.rope.freq_base", 6, &1.0f32.to_le_bytes()),
            pair("tokenizer.ggml.add_bos_token", 7, &[0]),
            pair("tokenizer.ggml.tokens", 9, &tokens),
            pair("tokenizer.ggml.token_type", 9, &token_types),
            pair("general.size", 10, &7u64.to_le_bytes()),
            pair("tokenizer.chat_template", 8, &string("{{ messages }}")),
        ]);
        assert_eq!(
            find(bytes.clone(), "tokenizer.chat_template").unwrap().as_deref(),
            Some("{{ messages }}")
        );
        assert_eq!(find(bytes.clone(), "general.architecture").unwrap().as_deref(), Some("qwen2"));
        assert_eq!(find(bytes, "general.missing").unwrap(), None);
    }

    #[test]
    fn a_non_string_value_under_the_key_is_an_error() {
        let bytes = file(&[pair("tokenizer.chat_template", 4, &1u32.to_le_bytes())]);
        let err = find(bytes, "tokenizer.chat_template").unwrap_err();
        assert!(err.contains("value type 4, not a string"), "{err}");
    }

    #[test]
    fn rejects_files_that_are_not_gguf() {
        assert!(find(b"PK\x03\x04rest of a zip".to_vec(), "k").unwrap_err().contains("no `GGUF` magic"));
        let mut bytes = file(&[]);
        bytes[4] = 9;
        assert!(find(bytes, "k").unwrap_err().contains("version 9"));
    }

    #[test]
    fn truncated_or_absurd_metadata_is_an_error_not_a_panic() {
        let bytes = file(&[pair("tokenizer.chat_template", 8, &string("{{ messages }}"))]);
        for cut in [3, 10, 30, bytes.len() - 1] {
            assert!(find(bytes[..cut].to_vec(), "tokenizer.chat_template").is_err(), "cut at {cut}");
        }
        let mut huge = string("k");
        huge.extend_from_slice(&8u32.to_le_bytes());
        huge.extend_from_slice(&u64::MAX.to_le_bytes());
        assert!(find(file(&[huge]), "k").unwrap_err().contains("more than"));
        let bogus = pair("k", 77, &[]);
        assert!(find(file(&[bogus]), "other").unwrap_err().contains("unknown metadata value type 77"));
    }
}
