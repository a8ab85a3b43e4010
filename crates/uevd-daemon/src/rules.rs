//! Loading the rules, with every problem logged at its place, and the
//! static nodes they name.

use uevd_node::DevDir;

/// Loads the rules, logging every problem with its place.
pub(crate) fn load_rules(config: &uevd_rules::Config) -> uevd_rules::Rules {
    let (rules, diagnostics) = uevd_rules::Rules::load(config);
    for d in &diagnostics {
        let place = format!("{}:{}:{}", d.file, d.at.line, d.at.column);
        match d.severity {
            uevd_rules::Severity::Error => log::error!("{place}: {}", d.message),
            uevd_rules::Severity::Warning => log::warn!("{place}: {}", d.message),
        }
    }
    log::info!(
        "{} rules from {} files",
        rules.line_count(),
        rules.file_count()
    );
    rules
}

/// Gives the nodes `OPTIONS+="static_node=..."` names their owner, group
/// and mode before any event: they exist (devtmpfs, or made by hand)
/// without a device behind them until first opened.
pub(crate) fn apply_static_nodes(dev: &DevDir, rules: &uevd_rules::Rules) {
    for node in rules.static_nodes() {
        if let Err(e) = dev.apply_static(
            &node.name,
            uevd_node::Permissions {
                uid: node.uid,
                gid: node.gid,
                mode: node.mode,
            },
        ) {
            log::debug!("static node {}: {e}", String::from_utf8_lossy(&node.name));
        }
    }
}
