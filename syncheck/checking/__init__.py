"""The checking stage: a finished answer checked against its sources (the Provenance answer check).

:mod:`~syncheck.checking.provenance` picks the relevant sources and combines their support for the answer's claims;
:mod:`~syncheck.checking.support` holds the support backends, among them ``syncheck`` (SynCheck's own scores of
the claim). Importing this package imports neither.
"""
