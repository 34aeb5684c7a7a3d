//! Why talking to an interactive program failed: the one error type of a
//! [`Session`](crate::Session) and of typing into it from another thread
//! ([`SessionLive`](crate::SessionLive)).

/// Why talking to the program failed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SessionError {
    #[error("{0}")]
    /// The program could not be started; the text says why.
    CannotStart(String),
    /// The program has ended.
    #[error("{program} has ended ({status}); start it again to go on")]
    Ended {
        /// The program.
        program: String,
        /// How it ended.
        status: String,
    },
    /// The command's time ran out while typing.
    #[error("the command's time ran out while typing into {program}")]
    OutOfTime {
        /// The program.
        program: String,
    },
    /// Reading from or writing to its terminal failed.
    #[error("talking to {program} failed: {why}")]
    Io {
        /// The program.
        program: String,
        /// What failed.
        why: String,
    },
}
