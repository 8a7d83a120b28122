#!/bin/sh
# mkcerts.sh DIR -- the TLS test material, made fresh with GnuTLS's certtool and psktool:
#   DIR/server/{ca-cert.pem,server-cert.pem,server-key.pem}  the daemon (--tls-certificates)
#   DIR/alice/{ca-cert.pem,client-cert.pem,client-key.pem}   a client signed by the CA (CN alice)
#   DIR/bob/...                                               another (CN bob)
#   DIR/other/...    a client signed by another CA (CN alice)
#   DIR/expired/...  a client of the right CA whose certificate expired (CN alice)
#   DIR/keys.psk     PSK users alice and bob (psktool's format)
#   DIR/wrong.psk    alice with another key
set -eu
d=$1
mkdir -p "$d"
cd "$d"
tmpl() { printf '%s\n' "$@" > tmpl.info; }

ca() { # ca NAME: a self-signed CA in NAME-ca-{key,cert}.pem
	certtool --generate-privkey --key-type=ecdsa --outfile "$1-ca-key.pem" 2>/dev/null
	tmpl "cn = rdax test CA $1" ca cert_signing_key "expiration_days = 30"
	certtool --generate-self-signed --load-privkey "$1-ca-key.pem" --template tmpl.info \
		--outfile "$1-ca-cert.pem" 2>/dev/null
}

cert() { # cert DIR CA CN KIND(server|client) [DAYS]
	mkdir -p "$1"
	cp main-ca-cert.pem "$1/ca-cert.pem" # the CA that signed the server
	certtool --generate-privkey --key-type=ecdsa --outfile "$1/$4-key.pem" 2>/dev/null
	if [ "$4" = server ]; then
		tmpl "cn = $3" "dns_name = localhost" "ip_address = 127.0.0.1" tls_www_server \
			encryption_key signing_key "expiration_days = ${5:-30}"
	else
		tmpl "cn = $3" tls_www_client encryption_key signing_key "expiration_days = ${5:-30}"
	fi
	certtool --generate-certificate --load-privkey "$1/$4-key.pem" --load-ca-certificate \
		"$2-ca-cert.pem" --load-ca-privkey "$2-ca-key.pem" --template tmpl.info \
		--outfile "$1/$4-cert.pem" 2>/dev/null
}

ca main
ca other
cert server main localhost server
cert alice main alice client
cert bob main bob client
cert other other alice client
# expired: valid from two days ago for one day (certtool's -1 day expiry is refused, so
# the dates are given explicitly)
mkdir -p expired
cp main-ca-cert.pem expired/ca-cert.pem
certtool --generate-privkey --key-type=ecdsa --outfile expired/client-key.pem 2>/dev/null
tmpl "cn = alice" tls_www_client encryption_key signing_key \
	"activation_date = \"$(date -u -d '-3 days' '+%Y-%m-%d %H:%M:%S UTC')\"" \
	"expiration_date = \"$(date -u -d '-2 days' '+%Y-%m-%d %H:%M:%S UTC')\""
certtool --generate-certificate --load-privkey expired/client-key.pem --load-ca-certificate \
	main-ca-cert.pem --load-ca-privkey main-ca-key.pem --template tmpl.info \
	--outfile expired/client-cert.pem 2>/dev/null
psktool -u alice -p keys.psk >/dev/null
psktool -u bob -p keys.psk >/dev/null
psktool -u alice -p wrong.psk >/dev/null
rm -f tmpl.info
