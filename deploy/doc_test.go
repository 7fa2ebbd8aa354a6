// Package deploy's tests check the deployment files under deploy/ with real
// validators: systemd-analyze for the unit, strict decoding into the
// Kubernetes API's own types for the manifests, and `make install` into a
// temporary DESTDIR for the install and static build.
package deploy
