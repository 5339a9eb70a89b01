//! Reports written whole or not at all.
//!
//! A report is written to a temporary file beside it and renamed over it, so that a reader (or
//! the next stage of the device bundle) sees the previous version or the new one, never an
//! empty or half-written file: not when the disk fills mid-write, not when the run is killed,
//! not while another process writes it. A run that writes its report as it goes (`run.json`
//! after every case) also holds [`lock`] on it, so that two runs never interleave their rows
//! in one file.

use std::path::{Path, PathBuf};

/// Writes `contents` to `path` by way of a temporary file in the same directory and a rename;
/// a `path` the user named that is a symbolic link is written through ([`through_link`]).
pub fn write(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), String> {
    replace(&through_link(path)?, contents)
}

/// Writes `contents` to `path` by way of a temporary file and a rename that replaces whatever
/// `path` is, a symbolic link included: never through it ([`write`] resolves a link the user
/// named first).
pub fn replace(path: &Path, contents: impl AsRef<[u8]>) -> Result<(), String> {
    let tmp = temporary(path, contents.as_ref())?;
    std::fs::rename(&tmp, path).map_err(|e| {
        let _ = std::fs::remove_file(&tmp);
        format!("cannot write {}: {e}", path.display())
    })
}

/// Files made by a `write` function, each to its path, as a set: every file is written to its
/// temporary first, and only once all of them are whole are they renamed into place (each
/// [`replace`]s whatever its path is, a link included). If one cannot be written, none is
/// renamed and the temporaries are removed: the previous set stays as it was, never half
/// overwritten (`check --dump DIR`'s `argK.npy`, names the command chose inside a folder the
/// user named, where a link is no one's intent).
pub fn replace_all(
    paths: &[PathBuf],
    mut contents: impl FnMut(usize) -> Result<Vec<u8>, String>,
) -> Result<(), String> {
    let mut written: Vec<PathBuf> = Vec::new();
    let undo = |written: &[PathBuf]| {
        for tmp in written {
            let _ = std::fs::remove_file(tmp);
        }
    };
    for (i, path) in paths.iter().enumerate() {
        match contents(i).and_then(|bytes| temporary(path, &bytes)) {
            Ok(tmp) => written.push(tmp),
            Err(e) => {
                undo(&written);
                return Err(format!("{e}; nothing was replaced"));
            }
        }
    }
    for (tmp, path) in written.iter().zip(paths) {
        std::fs::rename(tmp, path).map_err(|e| {
            undo(&written);
            format!("cannot write {}: {e}", path.display())
        })?;
    }
    Ok(())
}

/// `contents` written whole to a new temporary file beside `path`, ready to be renamed over it.
/// On the disk before the rename: a crash or power cut after it then finds the new file whole,
/// not a renamed file whose blocks were never written. `create_new`: a temporary name someone
/// linked elsewhere is refused, not followed.
fn temporary(path: &Path, contents: &[u8]) -> Result<PathBuf, String> {
    use std::io::Write;
    let tmp = sibling(path, &format!("tmp.{}", std::process::id()));
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(&tmp)
        .and_then(|mut f| f.write_all(contents).and_then(|()| f.sync_all()))
        .map_err(|e| {
            let _ = std::fs::remove_file(&tmp);
            format!("cannot write {}: {e}", path.display())
        })?;
    Ok(tmp)
}

/// `path`, or the file it leads to if it is a symbolic link: a report given as a link is
/// written through it (a rename over the link would replace the link with a file).
fn through_link(path: &Path) -> Result<PathBuf, String> {
    match std::fs::symlink_metadata(path) {
        Ok(meta) if meta.file_type().is_symlink() => std::fs::canonicalize(path).map_err(|e| {
            format!(
                "{} is a link to a file that cannot be reached ({e}): give the file itself",
                path.display()
            )
        }),
        _ => Ok(path.to_path_buf()),
    }
}

/// `.<name>.<suffix>` beside `path`: hidden, in the same directory (so that the rename stays
/// on one file system).
fn sibling(path: &Path, suffix: &str) -> PathBuf {
    let name = path
        .file_name()
        .map_or_else(|| "report".into(), |n| n.to_string_lossy());
    path.with_file_name(format!(".{name}.{suffix}"))
}

/// A report's lock, held while the process writes it (released when dropped or at exit; the
/// lock file goes when dropped).
#[derive(Debug)]
pub struct Lock {
    _file: std::fs::File,
    path: PathBuf,
}

impl Drop for Lock {
    /// The lock file is removed while still locked: a process that opened it meanwhile finds,
    /// once it holds the lock, that the name no longer leads to its file, and refuses
    /// ([`lock`]).
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// Takes the lock of the report at `path`, or says which report another process is writing.
pub fn lock(path: &Path) -> Result<Lock, String> {
    let path = &through_link(path)?;
    let lock_path = sibling(path, "lock");
    let file = std::fs::OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&lock_path)
        .map_err(|e| format!("cannot create {}: {e}", lock_path.display()))?;
    #[cfg(unix)]
    {
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor this function owns; no memory is involved.
        let taken = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0;
        // Locked, but maybe a file whose name a finishing run just removed ([`Lock`]'s drop):
        // then another process may lock a new one under the name.
        use std::os::unix::fs::MetadataExt;
        let same = |f: &std::fs::File| {
            let ours = f.metadata().ok()?;
            let named = std::fs::metadata(&lock_path).ok()?;
            Some(ours.ino() == named.ino() && ours.dev() == named.dev())
        };
        if !taken || same(&file) != Some(true) {
            return Err(format!(
                "another process is writing {}: wait for it to end, or give this run its own file (--json)",
                path.display()
            ));
        }
    }
    Ok(Lock {
        _file: file,
        path: lock_path,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Issue 55, finding 6: when one file of a dump could not be written, the files before it
    /// were already replaced. Now none is, and no temporary is left.
    #[test]
    fn a_set_is_replaced_whole_or_not_at_all() {
        let dir = std::env::temp_dir().join(format!("atomic-set-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let paths = [dir.join("arg0.npy"), dir.join("arg1.npy")];
        replace_all(&paths, |i| Ok(format!("old {i}").into_bytes())).unwrap();
        // The second file fails (its folder is not there): the first stays the old one.
        let failing = [dir.join("arg0.npy"), dir.join("gone/arg1.npy")];
        let err = replace_all(&failing, |i| Ok(format!("new {i}").into_bytes())).unwrap_err();
        assert!(err.contains("nothing was replaced"), "{err}");
        // So does a file whose contents cannot be made.
        let err = replace_all(&paths, |i| match i {
            0 => Ok(b"new 0".to_vec()),
            _ => Err("no bytes".to_string()),
        })
        .unwrap_err();
        assert!(err.contains("no bytes"), "{err}");
        assert_eq!(std::fs::read_to_string(&paths[0]).unwrap(), "old 0");
        assert_eq!(std::fs::read_to_string(&paths[1]).unwrap(), "old 1");
        let mut names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().into_string().unwrap())
            .collect();
        names.sort();
        assert_eq!(names, ["arg0.npy", "arg1.npy"]);
        replace_all(&paths, |i| Ok(format!("new {i}").into_bytes())).unwrap();
        assert_eq!(std::fs::read_to_string(&paths[1]).unwrap(), "new 1");
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn a_write_replaces_the_file_whole_and_leaves_no_temporary() {
        let dir = std::env::temp_dir().join(format!("atomic-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.json");
        write(&path, "first").unwrap();
        write(&path, "second").unwrap();
        assert_eq!(std::fs::read_to_string(&path).unwrap(), "second");
        let names: Vec<_> = std::fs::read_dir(&dir)
            .unwrap()
            .map(|e| e.unwrap().file_name())
            .collect();
        assert_eq!(names, ["run.json"]);
        // A directory that does not exist: an error naming the file, nothing left behind.
        let missing = dir.join("no/such/run.json");
        assert!(
            write(&missing, "x")
                .unwrap_err()
                .contains("no/such/run.json")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A file the command names inside a folder, found to be a link to a file elsewhere, is
    /// replaced by the new file: the linked file keeps its bytes (issue 55: `check --dump`
    /// wrote through such a link).
    #[cfg(unix)]
    #[test]
    fn replace_replaces_a_link_and_never_writes_through_it() {
        let dir = std::env::temp_dir().join(format!("atomic-link-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let victim = dir.join("victim.txt");
        std::fs::write(&victim, "keep me").unwrap();
        let link = dir.join("arg0.npy");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        replace(&link, "new").unwrap();
        assert_eq!(std::fs::read_to_string(&victim).unwrap(), "keep me");
        assert!(
            !std::fs::symlink_metadata(&link)
                .unwrap()
                .file_type()
                .is_symlink()
        );
        assert_eq!(std::fs::read_to_string(&link).unwrap(), "new");
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A lock leaves no file behind once dropped (issue 55: `run --json F` left `.F.lock`).
    #[test]
    fn a_dropped_lock_leaves_no_file() {
        let dir = std::env::temp_dir().join(format!("atomic-nolock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.json");
        drop(lock(&path).unwrap());
        let left: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert!(left.is_empty(), "{left:?}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn a_second_lock_on_one_report_is_refused_until_the_first_is_dropped() {
        let dir = std::env::temp_dir().join(format!("atomic-lock-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("run.json");
        let first = lock(&path).unwrap();
        // flock locks belong to the open file, so a second open in one process is refused too.
        assert!(
            lock(&path)
                .unwrap_err()
                .contains("another process is writing")
        );
        drop(first);
        lock(&path).unwrap();
        let _ = std::fs::remove_dir_all(&dir);
    }
}
