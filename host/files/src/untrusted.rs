//! Files in places a command can write (the project, its `.envhost/` and
//! `env/`, the shells' private folders), opened as if a hostile command had
//! just swapped them: for a symlink to the host's own stdout, a FIFO that
//! blocks every reader, `/dev/zero`, a socket, a folder or a file of many
//! gigabytes.
//!
//! This module owns how the host opens and creates such files, for every
//! part of the host:
//!
//! - **no symlink is followed** where a command could have planted one: a
//!   file's own name never ([`open_file`], `O_NOFOLLOW`), and below a folder
//!   that must hold the file ([`open_beneath`], [`Folder::beneath`]) no
//!   part of the path either (`openat2` with `RESOLVE_BENEATH`,
//!   `RESOLVE_NO_SYMLINKS` and `RESOLVE_NO_MAGICLINKS`; on kernels without
//!   it, one `openat(O_NOFOLLOW)` per part, which refuses the same paths);
//! - **nothing blocks**: every file is opened `O_NONBLOCK` (a FIFO opens at
//!   once) and `O_NOCTTY`, and is used only if the open descriptor is a
//!   regular file (`fstat` on the descriptor, never a `stat` of the path
//!   before opening, which a swap between the two would beat);
//! - **nothing is read without bound**: [`Opened::read`] refuses a file
//!   over its [`Bound`] before reading, and reads at most one byte past the
//!   bound (the file may grow meanwhile);
//! - **nothing is written through a planted name**: files the host creates
//!   are created `O_EXCL` (which never follows a symlink, dangling or not)
//!   at names a command cannot guess ([`Folder::create_unique`],
//!   [`create_unique`]), or at fixed names inside a folder the host just
//!   made ([`Folder::create_new`]).
//!
//! A refusal is a [`FileRefusal`]: the file and a [`RefusalReason`], whose
//! words say what is wrong ("is a FIFO, not a regular file"), for the
//! caller to put in a screen or an answer. It must not know what the files
//! hold or who reads them.

use std::ffi::{OsStr, OsString};
use std::fmt;
use std::fs::{File, Metadata};
use std::io::{self, Read};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::FileTypeExt;
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat, openat2};
use nix::sys::stat::{FileStat, Mode, SFlag};
use nix::unistd::UnlinkatFlags;

/// The most bytes the host reads of one kind of file, and what that kind
/// is called in a refusal ("a session record").
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Bound {
    /// The most bytes read.
    pub bytes: u64,
    /// What such a file is, with its article: "a session record".
    pub what: &'static str,
}

impl Bound {
    /// At most `bytes` of `what`.
    pub const fn new(bytes: u64, what: &'static str) -> Bound {
        Bound { bytes, what }
    }
}

/// What a path turned out to be, when it is not a regular file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FileKind {
    /// A directory.
    Folder,
    /// A named pipe.
    Fifo,
    /// A Unix socket.
    Socket,
    /// A character device (`/dev/zero`, a terminal).
    CharacterDevice,
    /// A block device.
    BlockDevice,
    /// Anything else.
    Other,
}

impl FileKind {
    fn of_mode(mode: u32) -> FileKind {
        match SFlag::from_bits_truncate(mode & SFlag::S_IFMT.bits()) {
            SFlag::S_IFDIR => FileKind::Folder,
            SFlag::S_IFIFO => FileKind::Fifo,
            SFlag::S_IFSOCK => FileKind::Socket,
            SFlag::S_IFCHR => FileKind::CharacterDevice,
            SFlag::S_IFBLK => FileKind::BlockDevice,
            _ => FileKind::Other,
        }
    }

    fn of_metadata(metadata: &Metadata) -> FileKind {
        let kind = metadata.file_type();
        if kind.is_dir() {
            FileKind::Folder
        } else if kind.is_fifo() {
            FileKind::Fifo
        } else if kind.is_socket() {
            FileKind::Socket
        } else if kind.is_char_device() {
            FileKind::CharacterDevice
        } else if kind.is_block_device() {
            FileKind::BlockDevice
        } else {
            FileKind::Other
        }
    }
}

impl fmt::Display for FileKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            FileKind::Folder => "a folder",
            FileKind::Fifo => "a FIFO",
            FileKind::Socket => "a socket",
            FileKind::CharacterDevice => "a character device",
            FileKind::BlockDevice => "a block device",
            FileKind::Other => "an unknown kind of file",
        })
    }
}

/// What was wrong with a file, in words that follow its name.
#[derive(Debug, thiserror::Error)]
pub enum RefusalReason {
    /// Nothing is there.
    #[error("does not exist")]
    Missing,
    /// The file's own name is a symlink.
    #[error(
        "is a symlink; the host does not follow symlinks where a command could have planted one"
    )]
    Symlink,
    /// A folder on the way to it is a symlink.
    #[error(
        "lies behind the symlink {}; the host does not follow symlinks where a command could have planted one",
        .0.display()
    )]
    SymlinkOnTheWay(PathBuf),
    /// A FIFO, a socket, a device or a folder.
    #[error("is {0}, not a regular file")]
    NotRegular(FileKind),
    /// Bigger than its bound.
    #[error(
        "is {}, more than the {} {} may be",
        size_words(*size),
        size_words(bound.bytes),
        bound.what
    )]
    TooLarge {
        /// Its size when it was refused.
        size: u64,
        /// The bound it passed.
        bound: Bound,
    },
    /// Another failure of the system.
    #[error("cannot be read: {0}")]
    Io(#[source] io::Error),
}

/// A file the host would not use, and why: "`<path>` is a FIFO, not a
/// regular file".
#[derive(Debug, thiserror::Error)]
#[error("{} {reason}", path.display())]
pub struct FileRefusal {
    /// The file, as the host named it.
    pub path: PathBuf,
    /// What was wrong.
    pub reason: RefusalReason,
}

impl FileRefusal {
    fn new(path: impl Into<PathBuf>, reason: RefusalReason) -> FileRefusal {
        FileRefusal {
            path: path.into(),
            reason,
        }
    }

    /// Whether nothing was there (often not a problem: a file not written
    /// yet).
    pub fn is_missing(&self) -> bool {
        matches!(self.reason, RefusalReason::Missing)
    }
}

/// A size in the words the host uses everywhere (`64 MiB`, `3.2 GiB`).
/// `envhost_core::text::bytes` says sizes with this (the core depends on
/// this crate, not the other way).
pub fn size_words(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if bytes < 1024 {
        return format!("{bytes} B");
    }
    let mut value = bytes as f64;
    let mut unit = "B";
    for next in UNITS {
        if value < 1024.0 {
            break;
        }
        value /= 1024.0;
        unit = next;
    }
    if value.fract() == 0.0 && value >= 10.0 {
        format!("{value:.0} {unit}")
    } else {
        format!("{value:.1} {unit}")
    }
}

/// A regular file, open for reading.
#[derive(Debug)]
pub struct Opened {
    file: File,
    path: PathBuf,
    metadata: Metadata,
}

impl Opened {
    /// Its metadata, taken from the open descriptor.
    pub fn metadata(&self) -> &Metadata {
        &self.metadata
    }

    /// The path it was opened by.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The open file, to read a part of it.
    pub fn file(&self) -> &File {
        &self.file
    }

    /// The open file.
    pub fn into_file(self) -> File {
        self.file
    }

    /// Its whole content, refused if it is, or grows to be, over `bound`.
    /// Read from the current offset, so once per opening; the descriptor
    /// stays open, and [`metadata`](Opened::metadata) is what it was
    /// before the read (a writer compares it with the file's later on).
    pub fn read(&self, bound: Bound) -> Result<Vec<u8>, FileRefusal> {
        let too_large =
            |size| FileRefusal::new(self.path.clone(), RefusalReason::TooLarge { size, bound });
        if self.metadata.len() > bound.bytes {
            return Err(too_large(self.metadata.len()));
        }
        let mut bytes = Vec::with_capacity(self.metadata.len() as usize);
        (&self.file)
            .take(bound.bytes.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|err| FileRefusal::new(self.path.clone(), RefusalReason::Io(err)))?;
        if bytes.len() as u64 > bound.bytes {
            let now = self.file.metadata().map_or(bytes.len() as u64, |m| m.len());
            return Err(too_large(now.max(bytes.len() as u64)));
        }
        Ok(bytes)
    }
}

/// The flags every file is opened for reading with.
fn read_flags() -> OFlag {
    OFlag::O_RDONLY | OFlag::O_NONBLOCK | OFlag::O_NOCTTY | OFlag::O_CLOEXEC | OFlag::O_NOFOLLOW
}

/// Opens the regular file `path` for reading; its own name is not followed
/// if it is a symlink (the folders above it are: they are the operator's or
/// the host's).
pub fn open_file(path: &Path) -> Result<Opened, FileRefusal> {
    let opened = openat(None, path, read_flags(), Mode::empty());
    let fd = opened.map_err(|errno| refusal_at(None, path, path, errno))?;
    regular(own(fd), path.to_owned())
}

/// [`open_file`], then [`Opened::read`].
pub fn read_file(path: &Path, bound: Bound) -> Result<Vec<u8>, FileRefusal> {
    open_file(path)?.read(bound)
}

/// Opens a file the operator named (`--plugin-config FILE`): symlinks are
/// followed, as the operator may keep it behind one, but it must still be
/// a regular file, and opening it never blocks.
pub fn open_named(path: &Path) -> Result<Opened, FileRefusal> {
    let flags = read_flags().difference(OFlag::O_NOFOLLOW);
    let opened = openat(None, path, flags, Mode::empty());
    let fd = opened.map_err(|errno| refusal_at(None, path, path, errno))?;
    regular(own(fd), path.to_owned())
}

/// Opens the regular file at `relative` below the folder `root` for
/// reading, following no symlink on the way and never leaving `root`.
/// `relative` must be relative and hold no `..`.
pub fn open_beneath(root: &Path, relative: &Path) -> Result<Opened, FileRefusal> {
    let shown = root.join(relative);
    let root_fd = open_folder_by_path(root, false)
        .map_err(|err| FileRefusal::new(root, reason_of_io(err)))?;
    let fd = resolve_beneath(root_fd.as_fd(), root, relative, read_flags())?;
    regular(fd, shown)
}

/// [`open_beneath`], then [`Opened::read`].
pub fn read_beneath(root: &Path, relative: &Path, bound: Bound) -> Result<Vec<u8>, FileRefusal> {
    open_beneath(root, relative)?.read(bound)
}

/// Opens `path` as [`open_beneath`] `root` when it lies inside `root`
/// (nothing on the way is followed), else as [`open_file`] (outside, where
/// the operator allowed it, only its own name is not followed).
pub fn open_within(root: &Path, path: &Path) -> Result<Opened, FileRefusal> {
    match path.strip_prefix(root) {
        Ok(relative) if relative.as_os_str().is_empty() => Err(FileRefusal::new(
            path,
            RefusalReason::NotRegular(FileKind::Folder),
        )),
        Ok(relative) => open_beneath(root, relative),
        Err(_) => open_file(path),
    }
}

/// A name nobody can guess: `<prefix><16 random hex digits><suffix>`.
pub fn unpredictable_name(prefix: &str, suffix: &str) -> io::Result<OsString> {
    let mut random = [0u8; 8];
    getrandom::fill(&mut random)
        .map_err(|err| io::Error::other(format!("no random bytes: {err}")))?;
    let digits: String = random.iter().map(|b| format!("{b:02x}")).collect();
    Ok(OsString::from(format!("{prefix}{digits}{suffix}")))
}

/// How many names [`create_unique`] tries before giving up (each taken
/// name is a 1-in-2^64 coincidence or someone planting them).
const UNIQUE_ATTEMPTS: usize = 16;

/// Creates a new file in the folder `dir` at an unpredictable name
/// (`<prefix><random><suffix>`), `O_EXCL`, with `mode` (less the umask).
pub fn create_unique(
    dir: &Path,
    prefix: &str,
    suffix: &str,
    mode: u32,
) -> io::Result<(PathBuf, File)> {
    let folder = if dir.as_os_str().is_empty() {
        Path::new(".")
    } else {
        dir
    };
    for _ in 0..UNIQUE_ATTEMPTS {
        let path = folder.join(unpredictable_name(prefix, suffix)?);
        match create_at(None, &path, mode) {
            Ok(file) => return Ok((path, file)),
            Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
            Err(err) => return Err(err),
        }
    }
    Err(taken(folder))
}

fn taken(folder: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::AlreadyExists,
        format!(
            "{UNIQUE_ATTEMPTS} random names in {} were all taken",
            folder.display()
        ),
    )
}

/// `O_CREAT | O_EXCL`: never opens what is there, a symlink included.
fn create_at(dir: Option<RawFd>, path: &Path, mode: u32) -> io::Result<File> {
    let flags = OFlag::O_WRONLY
        | OFlag::O_CREAT
        | OFlag::O_EXCL
        | OFlag::O_NOFOLLOW
        | OFlag::O_NOCTTY
        | OFlag::O_CLOEXEC;
    let fd = openat(dir, path, flags, Mode::from_bits_truncate(mode)).map_err(io::Error::from)?;
    Ok(File::from(own(fd)))
}

/// A folder, held open: what is read, created or removed in it is in that
/// very folder, even if its path is swapped for a symlink meanwhile.
#[derive(Debug)]
pub struct Folder {
    fd: OwnedFd,
    path: PathBuf,
}

impl Folder {
    /// The folder at `path`, which the operator or the host chose (its own
    /// name must not be a symlink; the folders above it may be).
    pub fn open(path: &Path) -> io::Result<Folder> {
        Ok(Folder {
            fd: open_folder_by_path(path, true)?,
            path: path.to_owned(),
        })
    }

    /// The folder at `relative` below `root`, reached without following any
    /// symlink; with `create`, missing folders are made: the last with that
    /// mode, those above it as any new folder (both less the umask).
    pub fn beneath(
        root: &Path,
        relative: &Path,
        create: Option<u32>,
    ) -> Result<Folder, FileRefusal> {
        let path = root.join(relative);
        let root_fd = open_folder_by_path(root, false)
            .map_err(|err| FileRefusal::new(root, reason_of_io(err)))?;
        let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = match create {
            None => resolve_beneath(root_fd.as_fd(), root, relative, flags)?,
            Some(mode) => walk(root_fd.as_fd(), root, relative, flags, Some(mode))?,
        };
        Ok(Folder { fd, path })
    }

    /// The folder's path, as it was opened.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The path of `name` in the folder (for words; use the folder's own
    /// methods to touch it).
    pub fn join(&self, name: impl AsRef<Path>) -> PathBuf {
        self.path.join(name)
    }

    /// Opens the regular file at `relative` (a name, or a plain path below
    /// the folder) for reading, following no symlink on the way or at the
    /// end.
    pub fn open_file(&self, relative: impl AsRef<Path>) -> Result<Opened, FileRefusal> {
        let relative = relative.as_ref();
        let fd = resolve_beneath(self.fd.as_fd(), &self.path, relative, read_flags())?;
        regular(fd, self.path.join(relative))
    }

    /// Opens `path` as [`open_file`](Folder::open_file) when it lies below
    /// the folder, else as the free [`open_file`] (outside, where the
    /// operator allowed it, only its own name is not followed).
    pub fn open_within(&self, path: &Path) -> Result<Opened, FileRefusal> {
        match path.strip_prefix(&self.path) {
            Ok(relative) if relative.as_os_str().is_empty() => Err(FileRefusal::new(
                path,
                RefusalReason::NotRegular(FileKind::Folder),
            )),
            Ok(relative) => self.open_file(relative),
            Err(_) => open_file(path),
        }
    }

    /// [`open_file`](Folder::open_file), then [`Opened::read`].
    pub fn read(&self, name: impl AsRef<Path>, bound: Bound) -> Result<Vec<u8>, FileRefusal> {
        self.open_file(name)?.read(bound)
    }

    /// Creates the file `name`, which must not exist (`AlreadyExists` if
    /// anything, a symlink included, is there), for writing.
    pub fn create_new(&self, name: impl AsRef<Path>, mode: u32) -> io::Result<File> {
        create_at(Some(self.fd.as_raw_fd()), name.as_ref(), mode)
    }

    /// Creates a new file at an unpredictable name
    /// (`<prefix><random><suffix>`); returns its name.
    pub fn create_unique(
        &self,
        prefix: &str,
        suffix: &str,
        mode: u32,
    ) -> io::Result<(OsString, File)> {
        for _ in 0..UNIQUE_ATTEMPTS {
            let name = unpredictable_name(prefix, suffix)?;
            match self.create_new(&name, mode) {
                Ok(file) => return Ok((name, file)),
                Err(err) if err.kind() == io::ErrorKind::AlreadyExists => continue,
                Err(err) => return Err(err),
            }
        }
        Err(taken(&self.path))
    }

    /// Renames `from` to `to` inside the folder (replacing `to`, a symlink
    /// there included, never what it points at).
    pub fn rename(&self, from: impl AsRef<Path>, to: impl AsRef<Path>) -> io::Result<()> {
        let fd = Some(self.fd.as_raw_fd());
        nix::fcntl::renameat(fd, from.as_ref(), fd, to.as_ref()).map_err(io::Error::from)
    }

    /// Removes the entry `name` (a symlink itself, never its target).
    pub fn remove(&self, name: impl AsRef<Path>) -> io::Result<()> {
        nix::unistd::unlinkat(
            Some(self.fd.as_raw_fd()),
            name.as_ref(),
            UnlinkatFlags::NoRemoveDir,
        )
        .map_err(io::Error::from)
    }

    /// Removes the empty folder `name`.
    pub fn remove_folder(&self, name: impl AsRef<Path>) -> io::Result<()> {
        nix::unistd::unlinkat(
            Some(self.fd.as_raw_fd()),
            name.as_ref(),
            UnlinkatFlags::RemoveDir,
        )
        .map_err(io::Error::from)
    }

    /// The names in the folder (not `.` and `..`), each with what an
    /// `lstat` says of it, if it still is there.
    pub fn entries(&self) -> io::Result<Vec<(OsString, Option<FileStat>)>> {
        let mut dir = nix::dir::Dir::openat(
            Some(self.fd.as_raw_fd()),
            ".",
            OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
            Mode::empty(),
        )
        .map_err(io::Error::from)?;
        let mut entries = Vec::new();
        for entry in dir.iter() {
            let entry = entry.map_err(io::Error::from)?;
            let name = OsStr::from_bytes(entry.file_name().to_bytes());
            if name == "." || name == ".." {
                continue;
            }
            let stat = nix::sys::stat::fstatat(
                Some(self.fd.as_raw_fd()),
                name,
                nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW,
            )
            .ok();
            entries.push((name.to_owned(), stat));
        }
        Ok(entries)
    }

    /// Sets the folder's own mode.
    pub fn set_mode(&self, mode: u32) -> io::Result<()> {
        nix::sys::stat::fchmod(self.fd.as_raw_fd(), Mode::from_bits_truncate(mode))
            .map_err(io::Error::from)
    }

    /// The folder's own metadata.
    pub fn metadata(&self) -> io::Result<Metadata> {
        File::from(self.fd.try_clone()?).metadata()
    }

    /// Flushes the folder's entries (a rename in it) to disk.
    pub fn sync(&self) -> io::Result<()> {
        File::from(self.fd.try_clone()?).sync_all()
    }
}

impl AsFd for Folder {
    fn as_fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }
}

/// Whether an `lstat` describes a regular file.
pub fn is_regular(stat: &FileStat) -> bool {
    SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFREG
}

fn own(fd: RawFd) -> OwnedFd {
    // SAFETY: `fd` was just returned by a successful open call and is
    // owned by nobody else.
    unsafe { OwnedFd::from_raw_fd(fd) }
}

/// `fd` as an [`Opened`] if it is a regular file.
fn regular(fd: OwnedFd, path: PathBuf) -> Result<Opened, FileRefusal> {
    let file = File::from(fd);
    let metadata = file
        .metadata()
        .map_err(|err| FileRefusal::new(path.clone(), RefusalReason::Io(err)))?;
    if !metadata.is_file() {
        let kind = FileKind::of_metadata(&metadata);
        return Err(FileRefusal::new(path, RefusalReason::NotRegular(kind)));
    }
    Ok(Opened {
        file,
        path,
        metadata,
    })
}

/// Opens a folder whose path the host trusts (the project, a folder it
/// made); with `refuse_link`, its own name must not be a symlink.
fn open_folder_by_path(path: &Path, refuse_link: bool) -> io::Result<OwnedFd> {
    let mut flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC;
    if refuse_link {
        flags |= OFlag::O_NOFOLLOW;
    }
    openat(None, path, flags, Mode::empty())
        .map(own)
        .map_err(io::Error::from)
}

/// Set once `openat2` is found missing (an old kernel, or a seccomp filter
/// that refuses it): the walk is used from then on.
static NO_OPENAT2: AtomicBool = AtomicBool::new(false);

/// Opens `relative` below `root_fd` with `flags`, following no symlink.
fn resolve_beneath(
    root_fd: BorrowedFd<'_>,
    root: &Path,
    relative: &Path,
    flags: OFlag,
) -> Result<OwnedFd, FileRefusal> {
    check_relative(root, relative)?;
    if !NO_OPENAT2.load(Ordering::Relaxed) {
        let how = OpenHow::new().flags(flags).resolve(
            ResolveFlag::RESOLVE_BENEATH
                | ResolveFlag::RESOLVE_NO_SYMLINKS
                | ResolveFlag::RESOLVE_NO_MAGICLINKS,
        );
        match openat2(root_fd.as_raw_fd(), relative, how) {
            Ok(fd) => return Ok(own(fd)),
            // Not there: a kernel before 5.6, or a filter's refusal.
            Err(Errno::ENOSYS | Errno::EPERM | Errno::E2BIG) => {
                NO_OPENAT2.store(true, Ordering::Relaxed);
            }
            // A rename elsewhere raced the lookup: the walk decides.
            Err(Errno::EAGAIN) => {}
            // A symlink on the way (ENOTDIR: where a folder was opened).
            Err(errno @ (Errno::ELOOP | Errno::EXDEV | Errno::ENOTDIR)) => {
                if let Some(refusal) = symlink_refusal(root_fd, root, relative) {
                    return Err(refusal);
                }
                if errno != Errno::ENOTDIR {
                    // Swapped back since: a symlink was there at the open.
                    return Err(FileRefusal::new(
                        root.join(relative),
                        RefusalReason::Symlink,
                    ));
                }
                let at = root.join(relative);
                return Err(refusal_at(None, &at, &at, errno));
            }
            Err(errno) => {
                let at = root.join(relative);
                return Err(refusal_at(Some(root_fd.as_raw_fd()), relative, &at, errno));
            }
        }
    }
    walk(root_fd, root, relative, flags, None)
}

/// Opens `relative` below `root_fd` one part at a time, each with
/// `O_NOFOLLOW`: the same paths `openat2` refuses are refused. With
/// `create`, missing folders are made on the way (the last part too).
fn walk(
    root_fd: BorrowedFd<'_>,
    root: &Path,
    relative: &Path,
    flags: OFlag,
    create: Option<u32>,
) -> Result<OwnedFd, FileRefusal> {
    check_relative(root, relative)?;
    let parts: Vec<&OsStr> = relative.iter().collect();
    let mut at: Option<OwnedFd> = None;
    let mut so_far = root.to_path_buf();
    for (index, part) in parts.iter().enumerate() {
        let last = index + 1 == parts.len();
        so_far.push(part);
        let dir_fd = at.as_ref().map_or(root_fd.as_raw_fd(), AsRawFd::as_raw_fd);
        let part_flags = if last {
            flags | OFlag::O_NOFOLLOW
        } else {
            OFlag::O_PATH | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC
        };
        if let Some(mode) = create {
            let mode = if last { mode } else { 0o777 };
            match nix::sys::stat::mkdirat(Some(dir_fd), *part, Mode::from_bits_truncate(mode)) {
                Ok(()) | Err(Errno::EEXIST) => {}
                Err(errno) => {
                    return Err(FileRefusal::new(
                        so_far,
                        RefusalReason::Io(io::Error::from(errno)),
                    ));
                }
            }
        }
        match openat(Some(dir_fd), *part, part_flags, Mode::empty()) {
            Ok(fd) => at = Some(own(fd)),
            // A symlink (ENOTDIR: where a folder was opened).
            Err(Errno::ELOOP | Errno::ENOTDIR) if is_symlink_at(dir_fd, Path::new(part)) => {
                let reason = if last {
                    RefusalReason::Symlink
                } else {
                    RefusalReason::SymlinkOnTheWay(so_far)
                };
                return Err(FileRefusal::new(root.join(relative), reason));
            }
            Err(errno) => {
                let at_path = root.join(relative);
                return Err(refusal_at(Some(dir_fd), Path::new(part), &at_path, errno));
            }
        }
    }
    at.ok_or_else(|| FileRefusal::new(root, RefusalReason::NotRegular(FileKind::Folder)))
}

/// Only plain relative paths are opened beneath a folder.
fn check_relative(root: &Path, relative: &Path) -> Result<(), FileRefusal> {
    let plain = !relative.as_os_str().is_empty()
        && relative
            .components()
            .all(|part| matches!(part, Component::Normal(_)));
    if plain {
        Ok(())
    } else {
        Err(FileRefusal::new(
            root.join(relative),
            RefusalReason::Io(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!(
                    "{} must be a plain path inside {} (no `..`, not absolute)",
                    relative.display(),
                    root.display()
                ),
            )),
        ))
    }
}

/// Which part of `relative` is the symlink `openat2` met, for the words;
/// `None` when none is (any more).
fn symlink_refusal(root_fd: BorrowedFd<'_>, root: &Path, relative: &Path) -> Option<FileRefusal> {
    let whole = root.join(relative);
    let mut so_far = PathBuf::new();
    let parts: Vec<&OsStr> = relative.iter().collect();
    for (index, part) in parts.iter().enumerate() {
        so_far.push(part);
        if is_symlink_at(root_fd.as_raw_fd(), &so_far) {
            let reason = if index + 1 == parts.len() {
                RefusalReason::Symlink
            } else {
                RefusalReason::SymlinkOnTheWay(root.join(&so_far))
            };
            return Some(FileRefusal::new(whole, reason));
        }
    }
    None
}

/// Whether `name`, relative to `dir`, is itself a symlink.
fn is_symlink_at(dir: RawFd, name: &Path) -> bool {
    nix::sys::stat::fstatat(Some(dir), name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW).is_ok_and(
        |stat| SFlag::from_bits_truncate(stat.st_mode & SFlag::S_IFMT.bits()) == SFlag::S_IFLNK,
    )
}

/// The refusal for an open of `name` (relative to `dir`) that failed with
/// `errno`; `shown` names the file in the words.
fn refusal_at(dir: Option<RawFd>, name: &Path, shown: &Path, errno: Errno) -> FileRefusal {
    let reason = match errno {
        // ENOTDIR: a file where a folder on the way should be.
        Errno::ENOENT | Errno::ENOTDIR => RefusalReason::Missing,
        Errno::ELOOP => RefusalReason::Symlink,
        // Opening a socket fails with ENXIO: say what it is.
        Errno::ENXIO => {
            match nix::sys::stat::fstatat(dir, name, nix::fcntl::AtFlags::AT_SYMLINK_NOFOLLOW) {
                Ok(stat) => RefusalReason::NotRegular(FileKind::of_mode(stat.st_mode)),
                Err(_) => RefusalReason::Io(io::Error::from(errno)),
            }
        }
        other => RefusalReason::Io(io::Error::from(other)),
    };
    FileRefusal::new(shown, reason)
}

fn reason_of_io(err: io::Error) -> RefusalReason {
    match err.kind() {
        io::ErrorKind::NotFound => RefusalReason::Missing,
        _ => RefusalReason::Io(err),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::symlink;

    const SMALL: Bound = Bound::new(64, "a test file");

    fn fifo(path: &Path) {
        nix::unistd::mkfifo(path, Mode::from_bits_truncate(0o600)).unwrap();
    }

    fn words(result: Result<impl fmt::Debug, FileRefusal>) -> String {
        result.unwrap_err().to_string()
    }

    #[test]
    fn regular_files_are_read_whole_within_their_bound() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("a.txt"), "hello").unwrap();
        let bytes = read_file(&dir.path().join("a.txt"), SMALL).unwrap();
        assert_eq!(bytes, b"hello");
        let beneath = read_beneath(dir.path(), Path::new("a.txt"), SMALL).unwrap();
        assert_eq!(beneath, b"hello");
        let missing = open_file(&dir.path().join("none")).unwrap_err();
        assert!(missing.is_missing(), "{missing}");
        assert!(missing.to_string().ends_with("none does not exist"));
    }

    #[test]
    fn fifos_sockets_devices_and_folders_are_refused_at_once() {
        let dir = tempfile::tempdir().unwrap();
        fifo(&dir.path().join("pipe"));
        std::os::unix::net::UnixListener::bind(dir.path().join("socket")).unwrap();
        std::fs::create_dir(dir.path().join("folder")).unwrap();
        let pipe = dir.path().join("pipe");
        assert_eq!(
            words(open_file(&pipe)),
            format!("{} is a FIFO, not a regular file", pipe.display())
        );
        assert!(
            words(open_beneath(dir.path(), Path::new("pipe")))
                .ends_with("is a FIFO, not a regular file")
        );
        assert!(
            words(open_file(&dir.path().join("socket")))
                .ends_with("is a socket, not a regular file")
        );
        assert!(
            words(open_file(&dir.path().join("folder")))
                .ends_with("is a folder, not a regular file")
        );
        assert!(
            words(open_file(Path::new("/dev/zero")))
                .ends_with("is a character device, not a regular file")
        );
    }

    #[test]
    fn symlinks_are_not_followed_at_the_end_nor_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        std::fs::create_dir(root.join("real")).unwrap();
        std::fs::write(root.join("real/file"), "x").unwrap();
        symlink("real/file", root.join("link")).unwrap();
        symlink("real", root.join("folder-link")).unwrap();
        symlink("/dev/zero", root.join("zero")).unwrap();
        let link = open_file(&root.join("link")).unwrap_err();
        assert!(matches!(link.reason, RefusalReason::Symlink), "{link}");
        assert!(link.to_string().contains("link is a symlink"), "{link}");
        assert!(matches!(
            open_beneath(root, Path::new("zero")).unwrap_err().reason,
            RefusalReason::Symlink
        ));
        let behind = open_beneath(root, Path::new("folder-link/file")).unwrap_err();
        assert_eq!(
            behind.to_string(),
            format!(
                "{} lies behind the symlink {}; the host does not follow symlinks where a command could have planted one",
                root.join("folder-link/file").display(),
                root.join("folder-link").display()
            )
        );
        // The walk, used where openat2 is missing, refuses the same.
        let root_fd = open_folder_by_path(root, false).unwrap();
        let walked = walk(
            root_fd.as_fd(),
            root,
            Path::new("folder-link/file"),
            read_flags(),
            None,
        );
        assert!(matches!(
            walked.unwrap_err().reason,
            RefusalReason::SymlinkOnTheWay(_)
        ));
        let walked = walk(root_fd.as_fd(), root, Path::new("link"), read_flags(), None);
        assert!(matches!(walked.unwrap_err().reason, RefusalReason::Symlink));
        let walked = walk(
            root_fd.as_fd(),
            root,
            Path::new("real/file"),
            read_flags(),
            None,
        );
        assert!(walked.is_ok());
        // Paths that climb out are refused before anything is opened.
        assert!(open_beneath(root, Path::new("../x")).is_err());
        assert!(open_beneath(root, Path::new("/etc/hostname")).is_err());
    }

    #[test]
    fn files_over_their_bound_are_refused_before_they_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let huge = dir.path().join("huge");
        File::create(&huge).unwrap().set_len(3 << 30).unwrap();
        let refusal = read_file(&huge, Bound::new(64 << 20, "a session record")).unwrap_err();
        assert_eq!(
            refusal.to_string(),
            format!(
                "{} is 3.0 GiB, more than the 64 MiB a session record may be",
                huge.display()
            )
        );
        std::fs::write(dir.path().join("exact"), [b'x'; 64]).unwrap();
        assert_eq!(
            read_file(&dir.path().join("exact"), SMALL).unwrap().len(),
            64
        );
    }

    #[test]
    fn a_file_that_grows_past_its_bound_while_read_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("growing");
        std::fs::write(&path, "short").unwrap();
        let opened = open_file(&path).unwrap();
        std::fs::write(&path, [b'x'; 200]).unwrap();
        let refusal = opened.read(SMALL).unwrap_err();
        assert!(
            matches!(refusal.reason, RefusalReason::TooLarge { size: 200, .. }),
            "{refusal}"
        );
    }

    #[test]
    fn created_files_never_follow_a_planted_name() {
        let dir = tempfile::tempdir().unwrap();
        let target = dir.path().join("target");
        std::fs::write(&target, "mine").unwrap();
        let folder = Folder::open(dir.path()).unwrap();
        symlink(&target, dir.path().join("planted")).unwrap();
        let err = folder.create_new("planted", 0o600).unwrap_err();
        assert_eq!(err.kind(), io::ErrorKind::AlreadyExists);
        assert_eq!(std::fs::read(&target).unwrap(), b"mine");
        let (name, _) = folder.create_unique("out-", ".txt", 0o600).unwrap();
        let name = name.to_str().unwrap();
        assert!(
            name.starts_with("out-") && name.ends_with(".txt") && name.len() == 24,
            "{name}"
        );
        let (path, _) = create_unique(dir.path(), ".tmp-", "", 0o600).unwrap();
        assert!(std::fs::symlink_metadata(path).unwrap().is_file());
    }

    #[test]
    fn a_folder_beneath_a_root_is_made_or_refused_when_a_link_is_on_the_way() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let folder = Folder::beneath(root, Path::new(".envhost/output"), Some(0o755)).unwrap();
        folder.create_new("a.txt", 0o600).unwrap();
        assert!(root.join(".envhost/output/a.txt").is_file());
        let names: Vec<_> = folder
            .entries()
            .unwrap()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(names, ["a.txt"]);
        folder.remove("a.txt").unwrap();
        let elsewhere = tempfile::tempdir().unwrap();
        symlink(elsewhere.path(), root.join("linked")).unwrap();
        for create in [None, Some(0o755)] {
            let refused = Folder::beneath(root, Path::new("linked/output"), create).unwrap_err();
            assert!(
                matches!(refused.reason, RefusalReason::SymlinkOnTheWay(_)),
                "{refused}"
            );
            let refused = Folder::beneath(root, Path::new("linked"), create).unwrap_err();
            assert!(
                matches!(refused.reason, RefusalReason::Symlink),
                "{refused}"
            );
        }
        assert_eq!(std::fs::read_dir(elsewhere.path()).unwrap().count(), 0);
    }

    #[test]
    fn sizes_are_worded_as_everywhere_else() {
        assert_eq!(size_words(512), "512 B");
        assert_eq!(size_words(64 << 20), "64 MiB");
        assert_eq!(size_words(3 << 30), "3.0 GiB");
        assert_eq!(size_words(1536), "1.5 KiB");
    }
}
