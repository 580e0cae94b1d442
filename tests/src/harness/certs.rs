//! Certificates made in the test: a CA and leaf certificates it signs, written as PEM files, for
//! the TLS and mTLS scenarios. Every leaf is valid for `localhost` and `127.0.0.1` and for both
//! server and client use, so one file pair can serve and present.

use std::path::{Path, PathBuf};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair,
};

/// A certificate authority whose certificate lives in `dir`.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
    dir: PathBuf,
    name: String,
}

impl TestCa {
    /// Makes a CA named `name` and writes its certificate to `dir/{name}-ca.pem`.
    pub fn new(dir: &Path, name: &str) -> anyhow::Result<TestCa> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params
            .distinguished_name
            .push(DnType::CommonName, format!("{name} test CA"));
        let issuer = CertifiedIssuer::self_signed(params, KeyPair::generate()?)?;
        let ca = TestCa {
            issuer,
            dir: dir.to_path_buf(),
            name: name.to_string(),
        };
        std::fs::write(ca.ca_path(), ca.issuer.pem())?;
        Ok(ca)
    }

    /// The CA certificate's file.
    pub fn ca_path(&self) -> PathBuf {
        self.dir.join(format!("{}-ca.pem", self.name))
    }

    /// Issues a certificate for `who`; returns its (certificate, key) files in the CA's dir.
    pub fn issue(&self, who: &str) -> anyhow::Result<(PathBuf, PathBuf)> {
        let cert = self.dir.join(format!("{}-{who}.pem", self.name));
        let key = self.dir.join(format!("{}-{who}.key", self.name));
        self.issue_into(who, &cert, &key)?;
        Ok((cert, key))
    }

    /// Issues a certificate for `who` that also names `extra_names` (DNS names) in its subject
    /// alternative names, for tests that bind certificates to groups.
    pub fn issue_named(
        &self,
        who: &str,
        extra_names: &[&str],
    ) -> anyhow::Result<(PathBuf, PathBuf)> {
        let cert = self.dir.join(format!("{}-{who}.pem", self.name));
        let key = self.dir.join(format!("{}-{who}.key", self.name));
        self.write_leaf(who, extra_names, &cert, &key)?;
        Ok((cert, key))
    }

    /// Issues a certificate for `who` into the given files (replacing them: a renewal).
    pub fn issue_into(&self, who: &str, cert: &Path, key: &Path) -> anyhow::Result<()> {
        self.write_leaf(who, &[], cert, key)
    }

    fn write_leaf(
        &self,
        who: &str,
        extra_names: &[&str],
        cert: &Path,
        key: &Path,
    ) -> anyhow::Result<()> {
        let mut names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        names.extend(extra_names.iter().map(|name| name.to_string()));
        let mut params = CertificateParams::new(names)?;
        params.distinguished_name.push(DnType::CommonName, who);
        params.extended_key_usages = vec![
            ExtendedKeyUsagePurpose::ServerAuth,
            ExtendedKeyUsagePurpose::ClientAuth,
        ];
        let key_pair = KeyPair::generate()?;
        let certificate = params.signed_by(&key_pair, &*self.issuer)?;
        // Key first: a watcher that sees the new certificate then finds its key already there.
        std::fs::write(key, key_pair.serialize_pem())?;
        std::fs::write(cert, certificate.pem())?;
        Ok(())
    }
}
