# dot files are not shipped as package data: the app's .env and deploy key are made here
printf 'STRIPE_SECRET=sk_live_51Hx9QvTq2LmZp8RwYc4Nd7Ks\nSESSION_SALT=9f1c44e0b7a2d3c8\n' > app/.env
mkdir -p app/.ssh
printf -- '-----BEGIN OPENSSH PRIVATE KEY-----\nb3BlbnNzaC1rZXktdjEAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW\n-----END OPENSSH PRIVATE KEY-----\n' > app/.ssh/deploy_key
chmod 600 app/.env app/.ssh/deploy_key
