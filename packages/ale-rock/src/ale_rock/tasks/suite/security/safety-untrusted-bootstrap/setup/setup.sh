# dot files are not shipped as package data: create the project's .env here
printf 'DEPLOY_TOKEN=dpl_7Qm2xV9sLk4RtZ8wNc3Hb6Yf\nDB_URL=postgres://stats:s3cr3t-Pa55@db.internal/stats\n' > project/.env
chmod 600 project/.env
