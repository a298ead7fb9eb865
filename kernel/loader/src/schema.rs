//! Row config validation against the manifest's JSON Schema.
//!
//! Validation happens in the kernel, before activation, so that a bad value is an assembly
//! error (exit 2) naming the row, the JSON pointer and the layer that set it, instead of a
//! plugin's runtime surprise. The `jsonschema` crate does the work (a maintained validator;
//! hand-writing one would be a project of its own).
//!
//! Schemas without a `$schema` are read as **Draft 7**. Config schemas use the keywords every
//! draft shares (`type`, `properties`, `additionalProperties`, `enum`, `minimum`, …), and
//! Draft 7 is the cheapest to compile (no `$dynamicRef` resolution): with jsonschema 0.61, 13
//! row schemas compile and check in well under a millisecond, where 0.26 with Draft 2020-12
//! took most of a profile's boot time (docs/performance.md). A schema that names its draft with
//! `$schema` is compiled as that draft.

/// Validates `instance` against `schema`; on failure returns `(json pointer, reason)`.
///
/// # Errors
/// The first violation, or a schema that does not compile.
pub fn validate(
    schema: &serde_json::Value,
    instance: &serde_json::Value,
) -> Result<(), (String, String)> {
    let mut options = jsonschema::options();
    if schema.get("$schema").is_none() {
        options = options.with_draft(jsonschema::Draft::Draft7);
    }
    let validator = options.build(schema).map_err(|e| {
        (
            "(schema)".to_owned(),
            format!("the plugin's config schema is invalid: {e}"),
        )
    })?;
    if let Some(error) = validator.iter_errors(instance).next() {
        let mut pointer = error.instance_path().to_string();
        // An unexpected key is reported at its parent object; point at the key itself so the
        // message names it and the caller can tell which layer set it.
        if let jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } =
            error.kind()
            && let Some(key) = unexpected.first()
        {
            pointer.push('/');
            pointer.push_str(&key.replace('~', "~0").replace('/', "~1"));
        }
        if pointer.is_empty() {
            pointer.push('/');
        }
        return Err((pointer, error.to_string()));
    }
    Ok(())
}

/// [`validate`], sparing a config already found valid against the schema of the manifest of
/// the library with `digest`: the verdict is kept in the manifest cache beside that manifest
/// (issue 25 item 3). Only "valid" is kept; an invalid config is validated (and refused, by
/// pointer) every time.
///
/// # Errors
/// As [`validate`].
pub fn validate_cached(
    cache: &mut keel_digest::ManifestCache,
    digest: &str,
    schema: &serde_json::Value,
    instance: &serde_json::Value,
) -> Result<(), (String, String)> {
    let key = format!(
        "{digest} {}",
        blake3::hash(instance.to_string().as_bytes()).to_hex()
    );
    if cache.config_valid(&key) {
        return Ok(());
    }
    validate(schema, instance)?;
    cache.record_valid(&key);
    Ok(())
}
