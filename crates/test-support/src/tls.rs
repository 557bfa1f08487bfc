//! An HTTPS front for the TLS tests: a throw-away CA ([`TestCa`]) and a TLS
//! listener on loopback ([`TlsFront`]) that terminates TLS with a serving
//! certificate of that CA and passes the bytes to a plain HTTP upstream (the
//! control plane emulator). The emulator then sees, and logs, every request
//! exactly as over plain HTTP, so the request-budget guard still applies.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};
use tokio::net::{TcpListener, TcpStream};
use tokio::task::JoinHandle;
use tokio_rustls::TlsAcceptor;
use tokio_rustls::rustls::ServerConfig;
use tokio_rustls::rustls::pki_types::pem::PemObject;
use tokio_rustls::rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// A fresh self-signed CA (ECDSA P-256) that signs serving certificates.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A serving certificate and its key, PEM.
pub struct ServingCert {
    /// The certificate (PEM).
    pub cert_pem: String,
    /// Its private key (PKCS#8 PEM).
    pub key_pem: String,
}

impl TestCa {
    /// A new CA named `common_name`.
    ///
    /// Errors: only if the crypto backend fails.
    pub fn new(common_name: &str) -> Result<Self, rcgen::Error> {
        let mut params = CertificateParams::new(Vec::<String>::new())?;
        let mut dn = DistinguishedName::new();
        dn.push(DnType::CommonName, common_name);
        params.distinguished_name = dn;
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![
            KeyUsagePurpose::KeyCertSign,
            KeyUsagePurpose::CrlSign,
            KeyUsagePurpose::DigitalSignature,
        ];
        Ok(Self {
            issuer: CertifiedIssuer::self_signed(params, KeyPair::generate()?)?,
        })
    }

    /// The CA certificate (PEM): what a `caBundleSecretRef` Secret holds.
    pub fn cert_pem(&self) -> String {
        self.issuer.pem()
    }

    /// A serving certificate for `names` (DNS names or IP addresses).
    ///
    /// Errors: only if the crypto backend fails or a name is not valid.
    pub fn serving(&self, names: &[&str]) -> Result<ServingCert, rcgen::Error> {
        let key = KeyPair::generate()?;
        let mut params =
            CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())?;
        let mut dn = DistinguishedName::new();
        dn.push(
            DnType::CommonName,
            names.first().copied().unwrap_or("server"),
        );
        params.distinguished_name = dn;
        params.key_usages = vec![
            KeyUsagePurpose::DigitalSignature,
            KeyUsagePurpose::KeyEncipherment,
        ];
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
        let cert = params.signed_by(&key, &self.issuer)?;
        Ok(ServingCert {
            cert_pem: cert.pem(),
            key_pem: key.serialize_pem(),
        })
    }
}

/// A TLS listener on `127.0.0.1` passing each connection to a plain
/// upstream. Stops (and drops its connections) when dropped.
pub struct TlsFront {
    /// `https://127.0.0.1:<port>`.
    pub url: String,
    forwarded: Arc<AtomicUsize>,
    task: JoinHandle<()>,
}

impl TlsFront {
    /// Listens on a free loopback port with `serving`, forwarding to
    /// `upstream`.
    ///
    /// Errors: the certificate or key does not parse, or the port cannot be
    /// bound.
    pub async fn start(serving: &ServingCert, upstream: SocketAddr) -> anyhow::Result<Self> {
        let _ = tokio_rustls::rustls::crypto::ring::default_provider().install_default();
        let certs = CertificateDer::pem_slice_iter(serving.cert_pem.as_bytes())
            .collect::<Result<Vec<_>, _>>()?;
        let key = PrivateKeyDer::from_pem_slice(serving.key_pem.as_bytes())?;
        let config = ServerConfig::builder()
            .with_no_client_auth()
            .with_single_cert(certs, key)?;
        let acceptor = TlsAcceptor::from(Arc::new(config));
        let listener = TcpListener::bind("127.0.0.1:0").await?;
        let url = format!("https://{}", listener.local_addr()?);
        let forwarded = Arc::new(AtomicUsize::new(0));
        let counter = forwarded.clone();
        let task = tokio::spawn(async move {
            while let Ok((socket, _)) = listener.accept().await {
                let acceptor = acceptor.clone();
                let counter = counter.clone();
                tokio::spawn(async move {
                    // A client that refuses the certificate ends here.
                    let Ok(mut tls) = acceptor.accept(socket).await else {
                        return;
                    };
                    let Ok(mut plain) = TcpStream::connect(upstream).await else {
                        return;
                    };
                    counter.fetch_add(1, Ordering::SeqCst);
                    let _ = tokio::io::copy_bidirectional(&mut tls, &mut plain).await;
                });
            }
        });
        Ok(Self {
            url,
            forwarded,
            task,
        })
    }

    /// Connections whose TLS handshake succeeded and that were passed to
    /// the upstream so far (a client that refused the certificate is not
    /// counted).
    pub fn forwarded(&self) -> usize {
        self.forwarded.load(Ordering::SeqCst)
    }
}

impl Drop for TlsFront {
    fn drop(&mut self) {
        self.task.abort();
    }
}
