//! The [`Builder`]: collects and validates bucket declarations and shapes, then
//! builds the [`Budget`]. It lives with the budget (the budget is what it makes),
//! so the declarations in `spec.rs` depend on nothing of either.

use arrayvec::{ArrayString, ArrayVec};
use core::sync::atomic::{AtomicU32, Ordering};

use super::{merge, Budget};
use crate::spec::{ConfigError, Spec};
use crate::ticket::{BucketId, Charged, Part, Shape};
use crate::{MAX_BUCKETS, MAX_NAME, MAX_PARTS, MAX_SHAPES};

/// Collects and validates bucket declarations, then builds a [`Budget`].
///
/// ```
/// use ergon_core::{Budget, ConfigError, Spec};
/// let mut b = Budget::builder();
/// b.add("weight", Spec::sliding(1200, 60_000_000_000, 60)).unwrap();
/// assert_eq!(b.add("weight", Spec::gate()), Err(ConfigError::DuplicateName));
/// assert_eq!(b.add("bad", Spec::sliding(10, 1000, 7)), Err(ConfigError::SlotsDoNotDivideWindow));
/// ```
///
/// Each builder takes a fresh tag (a process-wide counter) that every id, ticket and
/// flight of its budget carries, so that one budget refuses another's.
#[derive(Debug)]
pub struct Builder {
    buckets: ArrayVec<(ArrayString<MAX_NAME>, Spec), MAX_BUCKETS>,
    shapes: ArrayVec<Charged, MAX_SHAPES>,
    tag: u16,
    hold_guard_ns: i64,
}

/// The tag of the next builder. Wraps after 65536 budgets in one process: two
/// budgets that far apart could share a tag, which only weakens the check.
static NEXT_TAG: AtomicU32 = AtomicU32::new(0);

impl Default for Builder {
    fn default() -> Self {
        Builder {
            buckets: ArrayVec::new(),
            shapes: ArrayVec::new(),
            tag: NEXT_TAG.fetch_add(1, Ordering::Relaxed) as u16,
            hold_guard_ns: DEFAULT_HOLD_GUARD_NS,
        }
    }
}

/// The default of [`Builder::hold_guard`]: 50 ms.
pub const DEFAULT_HOLD_GUARD_NS: i64 = 50_000_000;

impl Builder {
    /// Declares a bucket; its id names it in [`Part`](crate::Part)s.
    pub fn add(&mut self, name: &str, spec: Spec) -> Result<BucketId, ConfigError> {
        spec.validate()?;
        if name.is_empty() {
            return Err(ConfigError::EmptyName);
        }
        let name = ArrayString::from(name).map_err(|_| ConfigError::NameTooLong)?;
        if self.buckets.iter().any(|(n, _)| *n == name) {
            return Err(ConfigError::DuplicateName);
        }
        let id = BucketId {
            budget: self.tag,
            index: self.buckets.len() as u8,
        };
        self.buckets
            .try_push((name, spec))
            .map_err(|_| ConfigError::TooManyBuckets)?;
        Ok(id)
    }

    /// Time added to every server wait before a throttled bucket resumes: the clock
    /// offset plus one-way latency between the caller and the venue. Default
    /// [`DEFAULT_HOLD_GUARD_NS`] (50 ms): a wait that ends exactly when the venue's
    /// does would send into the 429 again on any clock offset, and Binance bans
    /// clients that do. 0 is allowed for tests that want exact ends.
    pub fn hold_guard(&mut self, guard_ns: i64) -> Result<&mut Self, ConfigError> {
        if guard_ns < 0 {
            return Err(ConfigError::GuardTooWide);
        }
        self.hold_guard_ns = guard_ns;
        Ok(self)
    }

    /// Registers a request kind of the budget being built: see [`Budget::shape`].
    /// Its parts must name buckets already added.
    pub fn shape(&mut self, parts: &[Part]) -> Result<Shape, ConfigError> {
        let merged = merge(parts, self.tag, self.buckets.len())?;
        let index = self.shapes.len() as u8;
        self.shapes
            .try_push(merged)
            .map_err(|_| ConfigError::TooManyShapes)?;
        Ok(Shape {
            budget: self.tag,
            index,
        })
    }

    /// Builds the budget with every bucket empty at `now_ns`.
    pub fn build(self, now_ns: i64) -> Result<Budget, ConfigError> {
        if self.buckets.is_empty() {
            return Err(ConfigError::NoBuckets);
        }
        let mut budget = Budget::new(&self.buckets, self.tag, self.hold_guard_ns, now_ns);
        for parts in &self.shapes {
            budget.shape(parts)?;
        }
        Ok(budget)
    }
}

/// Checks a part list against the capacities once, at start-up, so the charge path
/// never meets a list it cannot carry.
pub(crate) fn validate_parts(parts: &[Part], tag: u16, buckets: usize) -> Result<(), ConfigError> {
    if parts.len() > MAX_PARTS {
        return Err(ConfigError::TooManyParts);
    }
    if parts
        .iter()
        .any(|p| p.bucket.budget != tag || p.bucket.index() >= buckets)
    {
        return Err(ConfigError::UnknownBucket);
    }
    Ok(())
}
