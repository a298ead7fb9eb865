//! Row config validation against the manifest's JSON Schema.
//!
//! Validation happens in the kernel, before activation, so that a bad value is an assembly
//! error (exit 2) naming the row, the JSON pointer and the layer that set it, instead of a
//! plugin's runtime surprise. The `jsonschema` crate does the work (a maintained validator;
//! hand-writing Draft 2020-12 would be a project of its own).

/// Validates `instance` against `schema`; on failure returns `(json pointer, reason)`.
///
/// # Errors
/// The first violation, or a schema that does not compile.
pub fn validate(
    schema: &serde_json::Value,
    instance: &serde_json::Value,
) -> Result<(), (String, String)> {
    let validator = jsonschema::validator_for(schema).map_err(|e| {
        (
            "(schema)".to_owned(),
            format!("the plugin's config schema is invalid: {e}"),
        )
    })?;
    if let Some(error) = validator.iter_errors(instance).next() {
        let mut pointer = error.instance_path.to_string();
        // An unexpected key is reported at its parent object; point at the key itself so the
        // message names it and the caller can tell which layer set it.
        if let jsonschema::error::ValidationErrorKind::AdditionalProperties { unexpected } =
            &error.kind
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
