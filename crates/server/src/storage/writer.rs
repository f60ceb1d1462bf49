//! [`WriterLock`]: one server process per SQLite file. The records of a file are held in memory by the
//! process that opened it, which is their only writer: a second process on the same file would run the
//! first one's runs again and answer from records the first never sees. The lock is an operating-system
//! file lock (`flock` on Unix, `LockFileEx` on Windows) on a file beside the database, `<database>.lock`,
//! which holds the holder's process id. The system lets go of it when the holder's process ends, however
//! it ends: a crashed holder never blocks the next start.

use std::fs::{File, OpenOptions, TryLockError};
use std::io::{Read, Seek, SeekFrom, Write};
use std::path::{Path, PathBuf};

use crate::error::ServerError;

/// The lock on a SQLite file, held while this value lives.
#[derive(Debug)]
pub(crate) struct WriterLock {
    /// The locked file; closing it lets go.
    _file: File,
}

impl WriterLock {
    /// Takes the lock of the database at `database`, or says who holds it
    /// ([`ServerError::DatabaseInUse`]). Never waits.
    pub(crate) fn acquire(database: &Path) -> Result<Self, ServerError> {
        let path = lock_path(database);
        let io = |source: std::io::Error| ServerError::DatabaseLock { path: path.clone(), source };
        let mut file =
            OpenOptions::new().read(true).write(true).create(true).truncate(false).open(&path).map_err(io)?;
        match file.try_lock() {
            Ok(()) => {}
            Err(TryLockError::WouldBlock) => {
                return Err(ServerError::DatabaseInUse {
                    database: database.to_path_buf(),
                    holder: read_holder(&mut file),
                });
            }
            Err(TryLockError::Error(source)) => return Err(io(source)),
        }
        file.set_len(0).map_err(io)?;
        file.seek(SeekFrom::Start(0)).map_err(io)?;
        file.write_all(format!("{}\n", std::process::id()).as_bytes()).map_err(io)?;
        file.flush().map_err(io)?;
        Ok(Self { _file: file })
    }
}

/// The lock file of the database at `database`: `<database>.lock`.
fn lock_path(database: &Path) -> PathBuf {
    let mut name = database.as_os_str().to_owned();
    name.push(".lock");
    PathBuf::from(name)
}

/// The holder's process id as its lock file says it: none when the file cannot be read (on Windows, a
/// locked file cannot) or holds no number (the holder has not written it yet).
fn read_holder(file: &mut File) -> Option<u32> {
    let mut text = String::new();
    file.take(64).read_to_string(&mut text).ok()?;
    text.trim().parse().ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn scratch(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("weft-writer-lock-{}-{name}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("a scratch directory");
        dir.join("server.db")
    }

    #[test]
    fn a_second_holder_is_refused_with_the_first_ones_pid() {
        let db = scratch("second");
        let first = WriterLock::acquire(&db).expect("the first lock");
        match WriterLock::acquire(&db) {
            Err(ServerError::DatabaseInUse { database, holder }) => {
                assert_eq!(database, db);
                // Windows does not let a locked file be read.
                if cfg!(unix) {
                    assert_eq!(holder, Some(std::process::id()));
                }
            }
            other => panic!("expected DatabaseInUse, got {other:?}"),
        }
        drop(first);
        let again = WriterLock::acquire(&db).expect("the lock once let go");
        drop(again);
    }

    #[test]
    fn a_stale_lock_file_does_not_block() {
        let db = scratch("stale");
        std::fs::write(lock_path(&db), "999999999\n").expect("a stale lock file");
        let _lock = WriterLock::acquire(&db).expect("a lock file nobody holds");
        let text = std::fs::read_to_string(lock_path(&db)).expect("the lock file");
        assert_eq!(text.trim(), std::process::id().to_string());
    }

    #[test]
    fn a_lock_file_that_cannot_be_made_is_a_typed_error() {
        let db = scratch("missing").with_file_name("no-such-dir").join("server.db");
        assert!(matches!(WriterLock::acquire(&db), Err(ServerError::DatabaseLock { .. })));
    }
}
