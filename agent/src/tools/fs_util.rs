//! File system errors in Node's words.
//!
//! Pi's tools let Node's fs errors through as their messages (for example
//! `ENOENT: no such file or directory, access '/x'`), and some quote just the code
//! (`Error code: ENOENT`). The model sees these texts, so they are rebuilt here from the errno.

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// The errno name and libuv's description of an io error, as Node reports them.
pub(crate) fn errno_name_and_text(error: &io::Error) -> (&'static str, String) {
    let Some(code) = error.raw_os_error() else {
        return ("UNKNOWN", "unknown error".to_string());
    };
    let (name, text) = match code {
        libc::ENOENT => ("ENOENT", "no such file or directory"),
        libc::EACCES => ("EACCES", "permission denied"),
        libc::EPERM => ("EPERM", "operation not permitted"),
        libc::ENOTDIR => ("ENOTDIR", "not a directory"),
        libc::EISDIR => ("EISDIR", "illegal operation on a directory"),
        libc::EEXIST => ("EEXIST", "file already exists"),
        libc::ELOOP => ("ELOOP", "too many symbolic links encountered"),
        libc::ENAMETOOLONG => ("ENAMETOOLONG", "name too long"),
        libc::EROFS => ("EROFS", "read-only file system"),
        libc::ENOSPC => ("ENOSPC", "no space left on device"),
        libc::EBUSY => ("EBUSY", "resource busy or locked"),
        libc::EINVAL => ("EINVAL", "invalid argument"),
        libc::EIO => ("EIO", "i/o error"),
        libc::EMFILE => ("EMFILE", "too many open files"),
        libc::ENFILE => ("ENFILE", "file table overflow"),
        libc::ETXTBSY => ("ETXTBSY", "text file is busy"),
        libc::EFBIG => ("EFBIG", "file too large"),
        libc::ENXIO => ("ENXIO", "no such device or address"),
        libc::EAGAIN => ("EAGAIN", "resource temporarily unavailable"),
        _ => return ("UNKNOWN", error.to_string()),
    };
    (name, text.to_string())
}

/// Node's message for a failed fs call on a path: `CODE: text, syscall 'path'`.
pub(crate) fn node_path_error(error: &io::Error, syscall: &str, path: &Path) -> String {
    let (name, text) = errno_name_and_text(error);
    format!("{name}: {text}, {syscall} '{}'", path.display())
}

/// Node's message for a failed fs call on an open handle: `CODE: text, syscall`.
pub(crate) fn node_fd_error(error: &io::Error, syscall: &str) -> String {
    let (name, text) = errno_name_and_text(error);
    format!("{name}: {text}, {syscall}")
}

/// `access(2)` with the given mode (`libc::R_OK` …), the check Pi makes before reading or editing.
pub(crate) fn access(path: &Path, mode: libc::c_int) -> io::Result<()> {
    let c_path = CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::from_raw_os_error(libc::ENOENT))?;
    // SAFETY: c_path is a valid NUL-terminated string that outlives the call.
    #[allow(unsafe_code)]
    let rc = unsafe { libc::access(c_path.as_ptr(), mode) };
    if rc == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn missing_file_reads_like_node() {
        let path = Path::new("/definitely/not/here");
        let error = access(path, libc::R_OK)
            .err()
            .map(|e| node_path_error(&e, "access", path));
        assert_eq!(
            error.as_deref(),
            Some("ENOENT: no such file or directory, access '/definitely/not/here'")
        );
    }
}
