package executor

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// TLS holds an executor's TLS settings (PEM files), as the Rust SDK's: the certificate of its
// own port, the CA of the admins, and the client certificate presented to them.
type TLS struct {
	// CertFile and KeyFile serve the executor's port over TLS; the default advertised address
	// becomes https://. Both or neither.
	CertFile, KeyFile string
	// CAFile verifies the admins of https:// addresses (default: the system's roots) and, with
	// RequireClientCert, the client certificates of callers.
	CAFile string
	// ClientCertFile and ClientKeyFile are presented to admins that ask for a client certificate
	// (default: CertFile and KeyFile).
	ClientCertFile, ClientKeyFile string
	// RequireClientCert accepts only callers with a certificate from CAFile (mTLS): only the
	// admins can then call Run, Kill and ReadLog.
	RequireClientCert bool
}

func (t TLS) check() error {
	if (t.CertFile == "") != (t.KeyFile == "") {
		return errors.New("executor: TLS.CertFile and TLS.KeyFile go together")
	}
	if t.RequireClientCert && (t.CertFile == "" || t.CAFile == "") {
		return errors.New("executor: TLS.RequireClientCert needs CertFile, KeyFile and CAFile")
	}
	return nil
}

func readPool(file string) (*x509.CertPool, error) {
	if file == "" {
		return nil, nil // the system's roots
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("executor: TLS CA: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("executor: TLS CA %s holds no PEM certificate", file)
	}
	return pool, nil
}

// serverConfig is the TLS of the executor's own port; nil for plaintext.
func (t TLS) serverConfig() (*tls.Config, error) {
	if t.CertFile == "" {
		return nil, nil
	}
	cert, err := tls.LoadX509KeyPair(t.CertFile, t.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("executor: TLS certificate: %w", err)
	}
	config := &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	if t.RequireClientCert {
		if config.ClientCAs, err = readPool(t.CAFile); err != nil {
			return nil, err
		}
		config.ClientAuth = tls.RequireAndVerifyClientCert
	}
	return config, nil
}

// clientConfig is the TLS of https:// admin connections.
func (t TLS) clientConfig() (*tls.Config, error) {
	roots, err := readPool(t.CAFile)
	if err != nil {
		return nil, err
	}
	config := &tls.Config{RootCAs: roots, MinVersion: tls.VersionTLS12}
	certFile, keyFile := t.ClientCertFile, t.ClientKeyFile
	if certFile == "" {
		certFile, keyFile = t.CertFile, t.KeyFile
	}
	if certFile != "" {
		cert, err := tls.LoadX509KeyPair(certFile, keyFile)
		if err != nil {
			return nil, fmt.Errorf("executor: TLS client certificate: %w", err)
		}
		config.Certificates = []tls.Certificate{cert}
	}
	return config, nil
}
