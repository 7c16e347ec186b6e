"""Label-inference attacks: what the adversary infers about the active party's labels from what it received
(ART's grouping by what an attack infers; feature-inference attacks live in ``vflpriv.attacks.features``)."""
