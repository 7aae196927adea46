"""Real servers that stand in for the outside world, on loopback: a scripted OpenAI-compatible model (`llm`), a
business's HTTPS API that verifies K-Agent's signatures (`upstream`), and their TLS server base (`tls_server`).

Used by the tests (through fixtures) and by the benchmarks (as processes). Never imported by the product.
"""
