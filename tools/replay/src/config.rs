//! `--config FILE`: bucket declarations read from their own file, in the trace's
//! declaration format, to replay a trace against limits other than those it was
//! recorded with. Every line of the file must be a declaration; the whole set is
//! checked here (each bucket, duplicates, at least one), so a mistake names the
//! file's line before any event is replayed.

use std::io::BufRead;

use ergon_core::Budget;

use crate::trace::{parse, Declaration, Line};
use crate::ReplayError;

/// Reads and checks a declaration file. Errors carry the file's 1-based line
/// number (0 for the file as a whole).
pub fn read(input: impl BufRead) -> Result<Vec<Declaration>, ReplayError> {
    let mut builder = Budget::builder();
    let mut declarations = Vec::new();
    for (index, text) in input.lines().enumerate() {
        let text = text?;
        if text.trim().is_empty() {
            continue;
        }
        let line = index + 1;
        let fail = |message: String| ReplayError::Line { line, message };
        let declaration = match parse(&text).map_err(fail)? {
            Line::Declare(d) => d,
            Line::Event { .. } => {
                return Err(fail(
                    "a configuration holds declarations only, no events".into(),
                ))
            }
        };
        builder
            .add(&declaration.name, declaration.spec)
            .map_err(|e| fail(format!("bucket {:?}: {e}", declaration.name)))?;
        declarations.push(declaration);
    }
    builder.build(0).map_err(|e| ReplayError::Line {
        line: 0,
        message: format!("the declarations make no budget: {e}"),
    })?;
    Ok(declarations)
}
