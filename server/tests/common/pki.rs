//! Certificates for the TLS tests (tests/tls.rs, tests/cluster_tls.rs), made with rcgen
//! and written as PEM files in a directory of their own: a CA, a server certificate, a
//! client's signed by the CA, and a stranger's signed by another CA.

#![allow(dead_code)]

use rcgen::{
    BasicConstraints, CertificateParams, DnType, ExtendedKeyUsagePurpose, IsCa, KeyPair,
    KeyUsagePurpose,
};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::PathBuf;
use std::sync::Arc;

/// Certificates and keys written as PEM files in a directory of their own.
pub struct Pki {
    pub dir: PathBuf,
}

impl Pki {
    pub fn path(&self, name: &str) -> String {
        self.dir.join(name).display().to_string()
    }

    /// A CA, a server certificate for localhost and 127.0.0.1, a client's, and a
    /// stranger's from another CA.
    pub fn make(tag: &str) -> Pki {
        let names = vec!["localhost".to_string(), "127.0.0.1".to_string()];
        Pki::make_for(tag, names, &[ExtendedKeyUsagePurpose::ServerAuth])
    }

    /// [`Pki::make`] with the server certificate naming `names` and for `usages`.
    pub fn make_for(tag: &str, names: Vec<String>, usages: &[ExtendedKeyUsagePurpose]) -> Pki {
        let dir = std::env::temp_dir().join(format!("accelkv-tls-{tag}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let ca = |name: &str| {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
            p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
            p.distinguished_name.push(DnType::CommonName, name);
            p.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
            let cert = p.self_signed(&key).unwrap();
            (cert, key)
        };
        let leaf = |names: Vec<String>,
                    usages: &[ExtendedKeyUsagePurpose],
                    issuer: &(rcgen::Certificate, KeyPair)| {
            let key = KeyPair::generate().unwrap();
            let mut p = CertificateParams::new(names).unwrap();
            p.extended_key_usages = usages.to_vec();
            let cert = p.signed_by(&key, &issuer.0, &issuer.1).unwrap();
            (cert, key)
        };
        let write = |name: &str, (cert, key): &(rcgen::Certificate, KeyPair)| {
            std::fs::write(dir.join(format!("{name}.pem")), cert.pem()).unwrap();
            std::fs::write(dir.join(format!("{name}.key")), key.serialize_pem()).unwrap();
        };
        let root = ca("accelkv test CA");
        let other = ca("somebody else's CA");
        write("ca", &root);
        write("server", &leaf(names, usages, &root));
        let client = vec!["client".to_string()];
        let auth = [ExtendedKeyUsagePurpose::ClientAuth];
        write("client", &leaf(client.clone(), &auth, &root));
        write("stranger", &leaf(client, &auth, &other));
        Pki { dir }
    }

    /// A rustls client trusting the CA, presenting `cert` (`client`, `stranger`) if given.
    pub fn client(&self, cert: Option<&str>) -> Arc<rustls::ClientConfig> {
        let provider = Arc::new(rustls::crypto::ring::default_provider());
        let mut roots = rustls::RootCertStore::empty();
        for c in CertificateDer::pem_file_iter(self.dir.join("ca.pem")).unwrap() {
            roots.add(c.unwrap()).unwrap();
        }
        let b = rustls::ClientConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_root_certificates(roots);
        Arc::new(match cert {
            None => b.with_no_client_auth(),
            Some(name) => {
                let chain = CertificateDer::pem_file_iter(self.dir.join(format!("{name}.pem")))
                    .unwrap()
                    .map(Result::unwrap)
                    .collect();
                let key = PrivateKeyDer::from_pem_file(self.dir.join(format!("{name}.key")));
                b.with_client_auth_cert(chain, key.unwrap()).unwrap()
            }
        })
    }
}

impl Drop for Pki {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}
