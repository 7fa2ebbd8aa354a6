// Package deploy's tests check the deployment files under deploy/ with real
// validators: systemd-analyze for the unit, strict decoding into the
// Kubernetes API's own types for the manifests, and `make install` into a
// temporary DESTDIR for the install and static build. They also hold the
// docs to the tree: the commands the README and docs/ show parse against
// the built command tree, the Makefile and the packages, each README
// command names what runs it, and every relative link leads somewhere.
package deploy
