//! The layered lookup (requirements B13, SEC-07…SEC-09): process environment (read-only, wins)
//! > `$KEEL_HOME/credentials.toml` > `<cwd>/.env` > `$KEEL_HOME/.env`, first non-empty wins.
//!
//! Every call reads the file layers afresh (no cache: a rotated value applies to the next
//! operation), and a layer is only read when the ones above it had no value, so a malformed
//! lower layer does not break a reference defined higher up. Nothing here writes a value into
//! the process environment (SEC-09); the environment layer is [`env_layer`], which takes a
//! resolved variable *out* of it. The environment lookups are injectable so tests need not
//! mutate the real environment (which is `unsafe` in Rust 2024).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use keel_plugin_api::sdk::Error;
use keel_plugin_api::services::credentials::{
    CredentialCode, Description, Source, is_valid_reference,
};

use crate::{dotenv, env_layer, file};

/// Reads one environment variable: `Some` only for a non-empty UTF-8 value.
pub type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// The layers of one `$KEEL_HOME`.
#[derive(Clone)]
pub struct Store {
    home: PathBuf,
    /// Reads the environment layer (`describe`, `set`, `list`).
    env: EnvLookup,
    /// Reads it for `resolve`, taking a found variable out of the environment.
    take_env: EnvLookup,
}

impl std::fmt::Debug for Store {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Store").field("home", &self.home).finish()
    }
}

/// Checks a reference name.
///
/// # Errors
/// `INVALID_REFERENCE` naming it.
pub fn check_reference(reference: &str) -> Result<(), Error> {
    if is_valid_reference(reference) {
        Ok(())
    } else {
        Err(Error::coded(
            CredentialCode::InvalidReference,
            format!("'{reference}' is not a valid credential reference ([A-Z_][A-Z0-9_]*)"),
        ))
    }
}

impl Store {
    /// Layers under `home` over the real process environment ([`env_layer`]).
    pub fn new(home: PathBuf) -> Self {
        Store {
            home,
            env: Arc::new(env_layer::peek),
            take_env: Arc::new(env_layer::take),
        }
    }

    /// Layers under `home` with an injected environment (tests).
    pub fn with_env(home: PathBuf, env: EnvLookup) -> Self {
        Store {
            home,
            take_env: Arc::clone(&env),
            env,
        }
    }

    /// `$KEEL_HOME/credentials.toml`.
    pub fn file_path(&self) -> PathBuf {
        self.home.join(file::FILE_NAME)
    }

    fn cwd_dotenv(cwd: Option<&Path>) -> Option<PathBuf> {
        match cwd {
            Some(c) => Some(c.join(".env")),
            None => std::env::current_dir().ok().map(|c| c.join(".env")),
        }
    }

    /// The winning value and its layer, or `None`. A value from the environment is taken
    /// out of it ([`env_layer::take`]).
    ///
    /// # Errors
    /// `INVALID_REFERENCE`; `CREDENTIALS_FILE` when a layer that had to be read is malformed.
    pub fn resolve(
        &self,
        reference: &str,
        cwd: Option<&Path>,
    ) -> Result<Option<(String, Source)>, Error> {
        self.lookup(reference, cwd, &self.take_env)
    }

    fn lookup(
        &self,
        reference: &str,
        cwd: Option<&Path>,
        env: &EnvLookup,
    ) -> Result<Option<(String, Source)>, Error> {
        check_reference(reference)?;
        if let Some(v) = env(reference) {
            return Ok(Some((v, Source::Env)));
        }
        if let Some(v) = file::read(&self.file_path())?
            .remove(reference)
            .filter(|v| !v.is_empty())
        {
            return Ok(Some((v, Source::File)));
        }
        if let Some(path) = Self::cwd_dotenv(cwd)
            && let Some(v) = dotenv::lookup(&dotenv::read(&path)?, reference)
        {
            return Ok(Some((v, Source::DotenvCwd)));
        }
        let home_env = self.home.join(".env");
        Ok(dotenv::lookup(&dotenv::read(&home_env)?, reference).map(|v| (v, Source::DotenvHome)))
    }

    /// `describe`: configured, source, writable; never the value (SEC-11).
    ///
    /// # Errors
    /// As [`Store::resolve`].
    pub fn describe(&self, reference: &str, cwd: Option<&Path>) -> Result<Description, Error> {
        let source = self.lookup(reference, cwd, &self.env)?.map(|(_, s)| s);
        Ok(Description {
            configured: source.is_some(),
            source,
            writable: source != Some(Source::Env),
        })
    }

    /// `set`: writes `reference = value` into the managed file.
    ///
    /// # Errors
    /// `INVALID_REFERENCE`; `INVALID_VALUE` for an empty value; `CREDENTIAL_SHADOWED` when the
    /// process environment defines it; `CREDENTIALS_FILE`/`CREDENTIALS_IO` from the write.
    pub fn set(&self, reference: &str, value: &str) -> Result<(), Error> {
        check_reference(reference)?;
        if value.is_empty() {
            return Err(Error::coded(
                CredentialCode::InvalidValue,
                format!("an empty value for {reference} counts as absent; use remove instead"),
            ));
        }
        if (self.env)(reference).is_some() {
            return Err(Error::coded(
                CredentialCode::Shadowed,
                format!(
                    "{reference} is set in the process environment, which always wins; unset it \
                     there before storing it in {}",
                    self.file_path().display()
                ),
            ));
        }
        file::update(&self.home, |e| {
            e.insert(reference.to_owned(), value.to_owned());
        })
    }

    /// `remove`: deletes `reference` from the managed file (absent is fine). Allowed even when
    /// the environment shadows it: dropping a stale entry is harmless.
    ///
    /// # Errors
    /// `INVALID_REFERENCE`; `CREDENTIALS_FILE`/`CREDENTIALS_IO` from the write.
    pub fn remove(&self, reference: &str) -> Result<(), Error> {
        check_reference(reference)?;
        if !file::read(&self.file_path())?.contains_key(reference) {
            return Ok(());
        }
        file::update(&self.home, |e| {
            e.remove(reference);
        })
    }

    /// `list`: every reference with a non-empty value in the file or `.env` layers, sorted,
    /// each with its winning layer (the environment when it shadows one). Names only.
    ///
    /// # Errors
    /// `CREDENTIALS_FILE` when a layer is malformed.
    pub fn list(&self, cwd: Option<&Path>) -> Result<Vec<(String, Source)>, Error> {
        let mut names = std::collections::BTreeSet::new();
        let file_entries = file::read(&self.file_path())?;
        names.extend(
            file_entries
                .iter()
                .filter(|(_, v)| !v.is_empty())
                .map(|(k, _)| k.clone()),
        );
        let mut dotenvs = Vec::new();
        if let Some(p) = Self::cwd_dotenv(cwd) {
            dotenvs.push(p);
        }
        dotenvs.push(self.home.join(".env"));
        for path in dotenvs {
            names.extend(
                dotenv::read(&path)?
                    .into_iter()
                    .filter(|(k, v)| !v.is_empty() && is_valid_reference(k))
                    .map(|(k, _)| k),
            );
        }
        let mut out = Vec::new();
        for name in names {
            if let Some((_, source)) = self.lookup(&name, cwd, &self.env)? {
                out.push((name, source));
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
#[path = "store_tests.rs"]
mod tests;
