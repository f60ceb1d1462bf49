//! Just enough of Redis' protocol (RESP2) for the chaos test: send one command, read its answer. Blocking,
//! for the checks after the load (and `PING` while waiting for a restarted Redis).

use std::io::{BufReader, Write as _};
use std::net::TcpStream;
use std::time::Duration;

/// An answer of Redis.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum Resp {
    /// `+OK`.
    Simple(String),
    /// `-ERR ...`.
    Error(String),
    /// `:1`.
    Int(i64),
    /// `$n` (none: `$-1`).
    Bulk(Option<String>),
    /// `*n` (none: `*-1`).
    Array(Option<Vec<Resp>>),
}

/// Sends `args` as one command to the Redis at `addr` and reads its answer.
pub(crate) fn command(addr: &str, args: &[&str]) -> Result<Resp, String> {
    let mut stream =
        TcpStream::connect(addr).map_err(|e| format!("cannot connect to Redis at {addr}: {e}"))?;
    stream.set_read_timeout(Some(Duration::from_secs(10))).map_err(|e| format!("Redis: {e}"))?;
    stream.write_all(&encode(args)).map_err(|e| format!("cannot write to Redis: {e}"))?;
    parse(&mut BufReader::new(stream))
}

/// `args` as a RESP array of bulk strings.
fn encode(args: &[&str]) -> Vec<u8> {
    let mut out = format!("*{}\r\n", args.len()).into_bytes();
    for arg in args {
        out.extend_from_slice(format!("${}\r\n", arg.len()).as_bytes());
        out.extend_from_slice(arg.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

fn line(reader: &mut impl std::io::BufRead) -> Result<String, String> {
    let mut text = String::new();
    reader.read_line(&mut text).map_err(|e| format!("cannot read Redis' answer: {e}"))?;
    if !text.ends_with("\r\n") {
        return Err(format!("a cut answer from Redis: {text:?}"));
    }
    text.truncate(text.len() - 2);
    Ok(text)
}

fn length(text: &str) -> Result<i64, String> {
    text.parse().map_err(|_| format!("a bad length from Redis: {text:?}"))
}

/// One answer read from `reader`.
pub(crate) fn parse(reader: &mut impl std::io::BufRead) -> Result<Resp, String> {
    let head = line(reader)?;
    let (kind, rest) = head.split_at_checked(1).ok_or("an empty answer from Redis")?;
    match kind {
        "+" => Ok(Resp::Simple(rest.to_owned())),
        "-" => Ok(Resp::Error(rest.to_owned())),
        ":" => Ok(Resp::Int(length(rest)?)),
        "$" => {
            let Ok(n) = usize::try_from(length(rest)?) else { return Ok(Resp::Bulk(None)) };
            let mut bytes = vec![0; n + 2];
            reader.read_exact(&mut bytes).map_err(|e| format!("cannot read Redis' answer: {e}"))?;
            bytes.truncate(n);
            String::from_utf8(bytes).map(|s| Resp::Bulk(Some(s))).map_err(|e| format!("not UTF-8: {e}"))
        }
        "*" => {
            let Ok(n) = usize::try_from(length(rest)?) else { return Ok(Resp::Array(None)) };
            let items = (0..n).map(|_| parse(reader)).collect::<Result<Vec<_>, _>>()?;
            Ok(Resp::Array(Some(items)))
        }
        _ => Err(format!("an answer of an unknown kind from Redis: {head:?}")),
    }
}

/// One entry of a Redis stream: its id and its fields, in order.
pub(crate) type StreamEntry = (String, Vec<(String, String)>);

/// The entries of an `XRANGE` answer.
pub(crate) fn stream_entries(answer: &Resp) -> Result<Vec<StreamEntry>, String> {
    let bad = || format!("not an XRANGE answer: {answer:?}");
    let Resp::Array(Some(items)) = answer else { return Err(bad()) };
    let mut out = Vec::new();
    for item in items {
        let Resp::Array(Some(parts)) = item else { return Err(bad()) };
        let [Resp::Bulk(Some(id)), Resp::Array(Some(fields))] = parts.as_slice() else { return Err(bad()) };
        let mut pairs = Vec::new();
        for pair in fields.chunks(2) {
            match pair {
                [Resp::Bulk(Some(k)), Resp::Bulk(Some(v))] => pairs.push((k.clone(), v.clone())),
                _ => return Err(bad()),
            }
        }
        out.push((id.clone(), pairs));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn commands_are_arrays_of_bulk_strings() {
        assert_eq!(encode(&["PING"]), b"*1\r\n$4\r\nPING\r\n");
        assert_eq!(
            encode(&["XRANGE", "k", "-", "+"]),
            b"*4\r\n$6\r\nXRANGE\r\n$1\r\nk\r\n$1\r\n-\r\n$1\r\n+\r\n"
        );
    }

    #[test]
    fn answers_of_every_kind_are_read() {
        let read = |text: &str| parse(&mut text.as_bytes());
        assert_eq!(read("+PONG\r\n"), Ok(Resp::Simple("PONG".into())));
        assert_eq!(read("-ERR no\r\n"), Ok(Resp::Error("ERR no".into())));
        assert_eq!(read(":42\r\n"), Ok(Resp::Int(42)));
        assert_eq!(read("$-1\r\n"), Ok(Resp::Bulk(None)));
        assert_eq!(read("*-1\r\n"), Ok(Resp::Array(None)));
        assert!(read("$5\r\nab").is_err(), "a cut bulk string");
        assert!(read("?x\r\n").is_err());
        let xrange = "*1\r\n*2\r\n$3\r\n1-0\r\n*4\r\n$1\r\ne\r\n$6\r\nvalues\r\n$1\r\nd\r\n$2\r\n{}\r\n";
        let entries = stream_entries(&read(xrange).unwrap()).unwrap();
        assert_eq!(
            entries,
            [("1-0".to_owned(), vec![("e".into(), "values".into()), ("d".into(), "{}".into())])]
        );
        assert!(stream_entries(&Resp::Int(1)).is_err());
    }
}
