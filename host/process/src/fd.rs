//! The helpers for file descriptors that several mechanisms need: putting a
//! pipe or a terminal into non-blocking mode, so that a read can never
//! stall the thread that watches a child, and telling a terminal that hung
//! up from a failed read.

use std::io;
use std::os::fd::{AsFd, AsRawFd};

use nix::errno::Errno;
use nix::fcntl::{FcntlArg, OFlag, fcntl};

/// Makes reads and writes on `fd` return `WouldBlock` instead of waiting,
/// keeping the descriptor's other status flags.
pub fn set_nonblocking(fd: impl AsFd) -> io::Result<()> {
    let fd = fd.as_fd().as_raw_fd();
    let flags = OFlag::from_bits_truncate(fcntl(fd, FcntlArg::F_GETFL)?);
    fcntl(fd, FcntlArg::F_SETFL(flags | OFlag::O_NONBLOCK))?;
    Ok(())
}

/// Whether a read from a terminal's controller side failed because every
/// holder of the terminal side closed it (Linux reports `EIO`).
pub fn is_hung_up(err: &io::Error) -> bool {
    err.raw_os_error() == Some(Errno::EIO as i32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    #[test]
    fn an_empty_nonblocking_pipe_would_block() {
        let (reader, _writer) = std::io::pipe().expect("pipe");
        set_nonblocking(&reader).expect("nonblocking");
        let mut reader = reader;
        let err = reader.read(&mut [0u8; 8]).expect_err("nothing to read");
        assert_eq!(err.kind(), io::ErrorKind::WouldBlock);
    }
}
