//! The embedded coordinator's state on disk ([`CoordinatorOptions::state_file`]): what it
//! decided (the members added, drained and removed, the placement, the epoch), so that a
//! restarted coordinator goes on from there instead of from the cluster file alone.
//!
//! The file is the JSON of [`StoredState`], the same record an etcd-mode leader leaves for the
//! next one. It is replaced atomically after every change the coordinator publishes
//! ([`crate::config::replace_file`]), so a crash at any point leaves the old state or the new
//! one, whole.
//!
//! [`CoordinatorOptions::state_file`]: super::CoordinatorOptions::state_file

use std::fs;
use std::io;
use std::path::Path;

use super::state::StoredState;

/// Most bytes a state file may have (a 10,000-bucket map's state is far below).
const MAX_BYTES: u64 = 64 << 20;

/// The state `path` holds; `None` when there is no such file. A file that cannot be read or
/// parsed is an error naming it (the coordinator does not start over it).
pub(super) fn read(path: &Path) -> Result<Option<StoredState>, String> {
    let bytes = match fs::metadata(path) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => {
            return Err(format!(
                "cannot read the state file {}: {e}",
                path.display()
            ))
        }
        Ok(m) if m.len() > MAX_BYTES => {
            return Err(format!(
                "the state file {} has {} bytes, more than {MAX_BYTES}",
                path.display(),
                m.len()
            ))
        }
        Ok(_) => fs::read(path)
            .map_err(|e| format!("cannot read the state file {}: {e}", path.display()))?,
    };
    serde_json::from_slice(&bytes).map(Some).map_err(|e| {
        format!(
            "the state file {} is not a coordinator's state: {e}",
            path.display()
        )
    })
}

/// Replaces `path` with `state`, atomically (see the module documentation).
pub(super) fn write(path: &Path, state: &StoredState) -> io::Result<()> {
    let json = serde_json::to_vec(state).map_err(io::Error::other)?;
    crate::config::replace_file(path, &json)
}
