//! The throw-away PKI of one test environment: a CA, the API server's serving
//! certificate, the `admin` client certificate and the service-account key.

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType,
    ExtendedKeyUsagePurpose, IsCa, KeyPair, KeyUsagePurpose,
};

/// User name of the client certificate written into the kubeconfig.
pub const ADMIN_USER: &str = "admin";

/// Group (certificate `O=`) of the client certificate: cluster-admin through the
/// built-in `cluster-admin` ClusterRoleBinding.
pub const ADMIN_GROUP: &str = "system:masters";

/// PEM-encoded material, all signed by (or being) one fresh ECDSA P-256 CA.
pub(crate) struct Pki {
    /// The CA certificate (trusted for serving and client certificates).
    pub ca_cert: String,
    /// The kube-apiserver serving certificate, for `127.0.0.1` and `localhost`.
    pub serving_cert: String,
    /// The serving certificate's private key (PKCS#8).
    pub serving_key: String,
    /// The client certificate of user [`ADMIN_USER`] in group [`ADMIN_GROUP`].
    pub client_cert: String,
    /// The client certificate's private key (PKCS#8).
    pub client_key: String,
    /// The service-account token signing key (PKCS#8).
    pub service_account_key: String,
    /// The public half of the service-account key (PKIX).
    pub service_account_pub: String,
}

fn name(common_name: &str, organization: Option<&str>) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, common_name);
    if let Some(org) = organization {
        dn.push(DnType::OrganizationName, org);
    }
    dn
}

/// Generates a fresh PKI.
///
/// Errors: only if the crypto backend fails.
pub(crate) fn generate() -> Result<Pki, rcgen::Error> {
    let mut ca_params = CertificateParams::new(Vec::<String>::new())?;
    ca_params.distinguished_name = name("envtest-ca", None);
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.key_usages = vec![
        KeyUsagePurpose::KeyCertSign,
        KeyUsagePurpose::CrlSign,
        KeyUsagePurpose::DigitalSignature,
    ];
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate()?)?;

    let serving_key = KeyPair::generate()?;
    let mut serving = CertificateParams::new(vec![
        "127.0.0.1".to_owned(),
        "localhost".to_owned(),
        "kubernetes".to_owned(),
        "kubernetes.default".to_owned(),
        "kubernetes.default.svc".to_owned(),
    ])?;
    serving.distinguished_name = name("kube-apiserver", None);
    serving.key_usages = vec![
        KeyUsagePurpose::DigitalSignature,
        KeyUsagePurpose::KeyEncipherment,
    ];
    serving.extended_key_usages = vec![ExtendedKeyUsagePurpose::ServerAuth];
    let serving_cert = serving.signed_by(&serving_key, &ca)?;

    let client_key = KeyPair::generate()?;
    let mut client = CertificateParams::new(Vec::<String>::new())?;
    client.distinguished_name = name(ADMIN_USER, Some(ADMIN_GROUP));
    client.key_usages = vec![KeyUsagePurpose::DigitalSignature];
    client.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let client_cert = client.signed_by(&client_key, &ca)?;

    let service_account = KeyPair::generate()?;

    Ok(Pki {
        ca_cert: ca.pem(),
        serving_cert: serving_cert.pem(),
        serving_key: serving_key.serialize_pem(),
        client_cert: client_cert.pem(),
        client_key: client_key.serialize_pem(),
        service_account_key: service_account.serialize_pem(),
        service_account_pub: service_account.public_key_pem(),
    })
}
