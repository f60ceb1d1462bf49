//! How the examples start and end: trace export when `WEFT_OTEL_ENDPOINT` is set, and errors printed as
//! readable chains.

use weft::otel::{OtelConfig, OtelError, OtelGuard};

/// Exports the example's spans over OTLP to `WEFT_OTEL_ENDPOINT` (for example Arize Phoenix at
/// `http://127.0.0.1:6006`), into the Phoenix project `WEFT_OTEL_PROJECT` when set, with prompts and
/// completions when `WEFT_OTEL_CONTENT=1`. Returns `None` when the variable is not set; keep the guard
/// until the example ends, so that its last spans are sent.
pub fn otel_from_env() -> Result<Option<OtelGuard>, OtelError> {
    let Ok(endpoint) = std::env::var("WEFT_OTEL_ENDPOINT") else { return Ok(None) };
    let mut config =
        OtelConfig::new(&endpoint).record_content(std::env::var("WEFT_OTEL_CONTENT").is_ok_and(|v| v == "1"));
    if let Ok(project) = std::env::var("WEFT_OTEL_PROJECT") {
        config = config.project(project);
    }
    let guard = weft::otel::init_with(config)?;
    println!("traces: exported to {endpoint}");
    Ok(Some(guard))
}

/// Ends an example: on an error, prints it as a readable chain (`error: what failed: why`) rather than
/// its `Debug` form, and exits with status 1.
pub fn report<E: std::error::Error + 'static>(result: Result<(), E>) -> std::process::ExitCode {
    match result {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(err) => {
            eprintln!("error: {}", weft::trace::error_chain(&err));
            std::process::ExitCode::FAILURE
        }
    }
}
