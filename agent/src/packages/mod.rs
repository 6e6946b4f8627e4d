//! Pi packages: sources in the `packages` setting (npm, git, local paths), their installation
//! under Pi's directories, and the extensions, skills, prompt templates and themes they offer.
//! The `pi install|remove|update|list|config` commands are in the CLI; this module does the
//! work and is what startup uses to find package resources.

mod manager;
mod resources;
mod source;

pub use manager::{
    offline, set_resource_enabled, source_of, Configured, InstallFailure, Output, PackageManager,
    PackageResource, PackageScope, Progress, Resolved,
};
pub use resources::{apply_patterns, package_resources, Found, Kind};
pub use source::{is_exact_version, parse_git, resolve_local, GitSource, NpmSource, Source};
