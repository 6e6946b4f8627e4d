//! Placeholder until implemented.

use super::model::Model;
use super::{Context, Emitter, StreamOptions};

pub(crate) async fn run(
    model: &Model,
    _context: &Context,
    _options: &StreamOptions,
    _em: &mut Emitter,
) -> Result<(), String> {
    Err(format!("API {} is not implemented yet", model.api))
}
