//! The host's own versions of three `wasi:filesystem` calls, in place of
//! wasmtime-wasi's; every other file call is wasmtime-wasi's, beneath the
//! handles these give out.
//!
//! - `get-directories`: the granted directories are the handles opened and
//!   checked once, when the plugin was loaded (`grants`), duplicated for
//!   each instance; never re-opened by path, so replacing a granted folder
//!   with a symlink (and forcing a restart) reaches nothing new.
//! - `descriptor.open-at`: as wasmtime-wasi's, except that the file is
//!   opened non-blocking and kept only if it is a regular file or a
//!   directory (a FIFO would block the open, then every read, with no way
//!   to interrupt it; devices and sockets have no business here), and that
//!   a plugin holds at most its share of open files (`limits`): past it
//!   the open fails with `quota`.
//! - `descriptor.symlink-at`: only links whose target is relative and
//!   descends (no `..`, not absolute): a link the plugin plants is followed
//!   by bash and every other tool of the agent, which, unlike the plugin,
//!   are not confined to the granted folder.
//!
//! This module must not decide what is granted (`grants` does) or how long
//! a call may take (`limits`).

use std::path::{Component, Path};
use std::sync::Arc;

use wasmtime::component::{Linker, Resource};
use wasmtime_wasi::filesystem::{Descriptor, Dir, File, OpenMode, WasiFilesystemView};
use wasmtime_wasi::p2::bindings::filesystem::types::{
    DescriptorFlags, ErrorCode, Host as _, HostDescriptor as _, OpenFlags, PathFlags,
};
use wasmtime_wasi::{FsPerms, runtime::in_tokio};

use crate::host::WASI_VERSION;
use crate::state::HostState;

/// Replaces wasmtime-wasi's `get-directories`, `open-at` and `symlink-at`
/// in `linker` (which must allow shadowing).
pub(crate) fn shadow(linker: &mut Linker<HostState>) -> wasmtime::Result<()> {
    linker
        .instance(&format!("wasi:filesystem/preopens@{WASI_VERSION}"))?
        .func_wrap("get-directories", |mut store, (): ()| {
            Ok((granted_directories(store.data_mut())?,))
        })?;
    let mut types = linker.instance(&format!("wasi:filesystem/types@{WASI_VERSION}"))?;
    types.func_wrap(
        "[method]descriptor.open-at",
        |mut store,
         (fd, path_flags, path, open_flags, flags): (
            Resource<Descriptor>,
            PathFlags,
            String,
            OpenFlags,
            DescriptorFlags,
        )| {
            Ok((open_at(
                store.data_mut(),
                fd,
                path_flags,
                &path,
                open_flags,
                flags,
            )?,))
        },
    )?;
    types.func_wrap(
        "[method]descriptor.symlink-at",
        |mut store, (fd, target, link): (Resource<Descriptor>, String, String)| {
            Ok((symlink_at(store.data_mut(), fd, target, link)?,))
        },
    )?;
    Ok(())
}

fn granted_directories(
    state: &mut HostState,
) -> wasmtime::Result<Vec<(Resource<Descriptor>, String)>> {
    let grants = state.grants();
    let mut directories = Vec::with_capacity(grants.directories.len());
    for grant in &grants.directories {
        // A duplicate of the handle checked at load: the same directory,
        // whatever its path leads to now.
        let handle = grant.handle.duplicate()?;
        let (perms, mode) = if grant.writable {
            (FsPerms::ReadWrite, OpenMode::READ | OpenMode::WRITE)
        } else {
            (FsPerms::ReadOnly, OpenMode::READ)
        };
        let descriptor = Descriptor::Dir(Dir::new(handle, perms, mode, true));
        let resource = state.table().push(descriptor)?;
        directories.push((resource, grant.guest_path.clone()));
    }
    Ok(directories)
}

fn open_at(
    state: &mut HostState,
    fd: Resource<Descriptor>,
    path_flags: PathFlags,
    path: &str,
    oflags: OpenFlags,
    flags: DescriptorFlags,
) -> wasmtime::Result<Result<Resource<Descriptor>, ErrorCode>> {
    let dir = match state.table().get(&fd)? {
        Descriptor::Dir(dir) => dir.clone(),
        Descriptor::File(_) => return Ok(Err(ErrorCode::NotDirectory)),
    };
    // The options and checks of wasmtime-wasi's `Dir::open_at`, plus
    // `nonblock`.
    let mut options = cap_primitives::fs::OpenOptions::new();
    let mut mode = OpenMode::empty();
    let create = oflags.contains(OpenFlags::CREATE);
    if create {
        if oflags.contains(OpenFlags::EXCLUSIVE) {
            options.create_new(true);
        } else {
            options.create(true);
        }
        options.write(true);
        mode |= OpenMode::WRITE;
    }
    if oflags.contains(OpenFlags::TRUNCATE) {
        options.truncate(true).write(true);
        mode |= OpenMode::WRITE;
    }
    if flags.contains(DescriptorFlags::READ) {
        options.read(true);
        mode |= OpenMode::READ;
    }
    if flags.contains(DescriptorFlags::WRITE) {
        options.write(true);
        mode |= OpenMode::WRITE;
    } else {
        // Opened for reading at least, as wasmtime-wasi does; the
        // permissions below refuse the rest.
        options.read(true);
        mode |= OpenMode::READ;
    }
    options._cap_fs_ext_follow(if path_flags.contains(PathFlags::SYMLINK_FOLLOW) {
        cap_primitives::fs::FollowSymlinks::Yes
    } else {
        cap_primitives::fs::FollowSymlinks::No
    });
    options._cap_fs_ext_nonblock(true);
    if flags.intersects(
        DescriptorFlags::FILE_INTEGRITY_SYNC
            | DescriptorFlags::DATA_INTEGRITY_SYNC
            | DescriptorFlags::REQUESTED_WRITE_SYNC,
    ) {
        return Ok(Err(ErrorCode::Unsupported));
    }
    if oflags.contains(OpenFlags::DIRECTORY)
        && oflags.intersects(OpenFlags::CREATE | OpenFlags::EXCLUSIVE | OpenFlags::TRUNCATE)
    {
        return Ok(Err(ErrorCode::Invalid));
    }
    if dir.perms.write_not_permitted() && (create || mode.contains(OpenMode::WRITE)) {
        return Ok(Err(ErrorCode::NotPermitted));
    }
    if !state.open_files().has_room() {
        return Ok(Err(ErrorCode::Quota));
    }
    let opened = match cap_primitives::fs::open(&dir.dir, Path::new(path), &options) {
        Ok(file) => file,
        Err(err) => return Ok(Err(ErrorCode::from(err))),
    };
    let file_type = match opened.metadata() {
        Ok(metadata) => metadata.file_type(),
        Err(err) => return Ok(Err(ErrorCode::from(err))),
    };
    let descriptor = if file_type.is_dir() {
        Descriptor::Dir(Dir::new(opened, dir.perms, mode, true))
    } else if oflags.contains(OpenFlags::DIRECTORY) {
        return Ok(Err(ErrorCode::NotDirectory));
    } else if file_type.is_file() {
        Descriptor::File(File::new(opened, dir.perms, mode, true))
    } else {
        // A FIFO, a socket or a device: closed again at once.
        return Ok(Err(ErrorCode::NotPermitted));
    };
    let held = match &descriptor {
        Descriptor::Dir(dir) => Arc::clone(&dir.dir),
        Descriptor::File(file) => Arc::clone(&file.file),
    };
    let resource = state.table().push(descriptor)?;
    state.open_files().hold(&held);
    Ok(Ok(resource))
}

/// Whether a symlink to `target` stays beneath the directory it is made
/// in, whatever that directory is.
fn descends(target: &str) -> bool {
    !target.is_empty()
        && Path::new(target)
            .components()
            .all(|part| matches!(part, Component::Normal(_) | Component::CurDir))
}

fn symlink_at(
    state: &mut HostState,
    fd: Resource<Descriptor>,
    target: String,
    link: String,
) -> wasmtime::Result<Result<(), ErrorCode>> {
    if !descends(&target) {
        return Ok(Err(ErrorCode::NotPermitted));
    }
    let mut view = state.filesystem();
    match in_tokio(view.symlink_at(fd, target, link)) {
        Ok(()) => Ok(Ok(())),
        Err(err) => Ok(Err(view.convert_error_code(err)?)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_descending_relative_links_are_allowed() {
        for allowed in ["inside.txt", "sub/file", "./sub", "a/./b"] {
            assert!(descends(allowed), "{allowed}");
        }
        for refused in ["", "/etc/passwd", "../secret", "sub/../../x", "a/..", "//x"] {
            assert!(!descends(refused), "{refused}");
        }
    }
}
