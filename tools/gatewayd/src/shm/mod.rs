//! The gateway's side of the shared-memory protocol ([`ergon_gateway::shm`]
//! describes it, with the client): the [`Hub`] that serves the clients on the
//! gateway's event loop, the journal of orders in flight, the owners of client
//! order id blocks, the halts file and the clients' fair shares. The journal
//! and its [`Recovery`] at start are public: the simulator restarts a gateway
//! on them.

mod dirs;
mod halts;
mod hub;
mod journal;
mod owners;
mod recovery;
mod share;

pub use dirs::{check_dir, runtime_dir, PrivateDir};
pub use halts::{Halt, HaltLog};
pub use hub::{Hub, HubConfig, HUB_TOKEN, PENDING_PER_UID, SILENT_CONN_NS};
pub use journal::{check as check_journal, Found, Journal, JournalOwner};
pub use owners::FORGET_NAMES_DAYS;
pub use recovery::{outcome_unknown, Driven, Recoverer, Recovery, RECOVER};
